"""processor package."""
