"""`python -m llamad` runs the daemon, like the `llamad` command."""

from llamad.daemon.main import main

main()
