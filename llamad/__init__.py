"""llamad: keep local llama.cpp servers always on."""

__version__ = "0.1.0"
