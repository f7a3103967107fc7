"""The instance lifecycle: states, events and the pure transition function.

Pure: imports nothing else of llamad, starts no process, reads no clock.
"""
