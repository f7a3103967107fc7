"""What every room codes against: the gateway port, callers, API families and their error shapes."""
