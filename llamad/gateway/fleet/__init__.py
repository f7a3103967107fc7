"""The fleet's peers and the models they serve."""
