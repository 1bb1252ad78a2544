"""Drift check: compare live (or bundled) VMs and nodes with a desired state."""
