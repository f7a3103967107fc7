"""The gateway: one HTTP endpoint in front of every configured model."""
