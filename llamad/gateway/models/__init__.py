"""Names to instances: the router, the supervisor's view, listings, downloads."""
