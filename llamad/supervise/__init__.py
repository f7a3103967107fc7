"""Running instances: child processes, their logs, one task per instance, the supervisor, reload."""
