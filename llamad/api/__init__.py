"""The control API: the Starlette app, its controller, status and metrics, and serving it
on the Unix socket and on TCP."""
