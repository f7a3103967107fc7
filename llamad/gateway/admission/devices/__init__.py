"""Memory per device: where a model's bytes go (GPUs, Metal, RAM), each device's budget,
and which models to evict from the device that needs room."""
