"""`llamactl`: the command line, standard library only."""
