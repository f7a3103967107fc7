"""Ollama's HTTP API on the gateway, translated to and from llama-server's endpoints.

`ollama_routes(gateway)` returns the Starlette routes; the gateway app mounts them next to
its OpenAI-compatible `/v1/...` routes.
"""

from llamad.gateway.ollama.routes import ollama_routes

__all__ = ["ollama_routes"]
