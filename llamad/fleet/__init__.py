"""Other llamads: peers from `[fleet]`, mDNS/Tailscale discovery, and RPC workers on peers."""
