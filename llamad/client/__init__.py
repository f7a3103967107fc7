"""A standard-library HTTP client for the control API, on the Unix socket or over TCP."""
