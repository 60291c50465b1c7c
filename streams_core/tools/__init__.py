"""Command-line tools: `python -m streams_core.tools reset ...` (the application reset tool)."""
