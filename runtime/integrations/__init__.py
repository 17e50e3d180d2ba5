"""Adapters that let other frameworks use caisson sessions (Inspect AI, mini-swe-agent)."""
