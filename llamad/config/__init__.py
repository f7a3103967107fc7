"""The config file: its TOML shape (pydantic), line numbers, and loading it into specs."""
