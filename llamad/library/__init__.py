"""The model library: every GGUF already on the machine (plain folders, LM Studio's,
Ollama's store, the Hugging Face cache) as on-demand models, and pulls that add more."""
