"""The daemon's one HTTP/1.1 client: kept-alive connections to instances, fleet peers and
the daemon's children, and the bounded reading of their answers."""
