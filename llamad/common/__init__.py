"""Small standard-library helpers every layer may use: XDG paths, token files, Unix sockets."""
