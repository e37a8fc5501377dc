"""torch's own elastic control plane, run for trainsim's simulator (see host.py)."""
