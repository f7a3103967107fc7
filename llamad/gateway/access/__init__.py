"""The gateway's one way in: every request of every route passes the door (`door.py`),
which decides its route (`table.py`), its caller, whether that caller may do what it
asks, and its body, then hands the route a `Call` (`call.py`) holding all of it."""
