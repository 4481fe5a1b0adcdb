"""Baton worker SDK."""
