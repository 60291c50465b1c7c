"""spark package."""
