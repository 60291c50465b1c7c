"""kstream package."""
