"""IQv2 machinery: how a store copy answers a query, on the host that holds it."""
