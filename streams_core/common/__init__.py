"""The bottom floor: value types and protocols every layer shares (clients, processor, state, runtime, api)."""
