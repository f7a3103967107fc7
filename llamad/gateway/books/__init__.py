"""What the gateway counts: activity, usage, metrics and the live event bus."""
