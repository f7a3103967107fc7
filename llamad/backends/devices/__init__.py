"""The machine's accelerators and their memory: what llama-server, the vendors' tools and
macOS report, read by pure parsers and gathered by one async probe."""
