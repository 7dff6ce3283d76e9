"""models/networks."""
