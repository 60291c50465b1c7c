"""The routes of the REST layer, one module per resource: instances, state, topology, health, and the dashboard (ui)."""
