"""What the Ollama layer uses of the gateway: its port, under the names this layer uses.

keep_alive, as passed to `lease`: seconds of idle time after this request before the model
may be unloaded; 0 unloads it as soon as nothing is in flight; a negative value never
unloads it; None leaves the model's configured idle timeout alone.
"""

from __future__ import annotations

from llamad.gateway.contract.port import GatewayPort, ModelView, Upstream

__all__ = ["GatewayPort", "ModelView", "Upstream"]
