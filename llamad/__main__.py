"""`python -m llamad` runs the daemon, like the `llamad` command."""

from llamad.daemon import main

main()
