"""When a model may take a request, load, stop or be evicted."""
