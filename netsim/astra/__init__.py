"""ASTRA-sim compatibility: its collective semantics on netsim's networks."""
