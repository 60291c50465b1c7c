"""Command-line tools: `python -m streams_core.tools reset ...` (the application reset tool) and
`python -m streams_core.tools topics ...` (create and list topics)."""
