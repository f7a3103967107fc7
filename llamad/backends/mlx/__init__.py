"""`kind = "mlx"`: mlx_lm.server, Apple's MLX-LM OpenAI-compatible server."""
