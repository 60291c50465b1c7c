"""internals package."""
