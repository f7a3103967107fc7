"""Benchmarks: `make bench` runs them against the real llama-server."""
