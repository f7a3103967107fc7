"""`python -m llamad` runs the daemon, like the `llamad` command."""

from llamad.daemon.entry import main

main()
