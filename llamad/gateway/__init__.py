"""The gateway: one OpenAI-compatible endpoint for every instance, with on-demand start,
idle stop and memory-aware eviction. It reaches instances only through the supervisor."""
