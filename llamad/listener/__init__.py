"""The listeners' HTTP/1.1 server: an ASGI app on TCP (optionally TLS) or a Unix socket.

Written on asyncio's public protocol API and httptools' parser (llhttp), with the guard
a daemon facing strangers needs built in: head and body deadlines, head and body limits,
a connection cap with a share per client address, refusals in the API family's shape.
`server.Listener` serves a bound socket, `tcp.serve_tcp` binds and serves a TCP port.
"""
