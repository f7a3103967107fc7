"""`llamad`, the foreground daemon: entry point, lock, sd_notify, logs, services, demo."""
