"""One model served by several targets: replicas, the balance between them, prompt
affinity and failover."""
