"""Sending requests upstream and relaying their answers."""
