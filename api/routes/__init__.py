"""routes package."""
