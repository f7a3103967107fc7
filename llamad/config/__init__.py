"""The config file: its TOML shape (pydantic-settings), line numbers, and loading it into specs."""
