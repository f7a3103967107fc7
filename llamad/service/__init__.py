"""`llamactl service`: install llamad under launchd or systemd, standard library only."""
