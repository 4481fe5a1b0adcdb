"""Baton's AWS deployment: one construct per concern, composed by :class:`BatonStack`."""
