"""Lambda glue shared by Baton's functions: Powertools resolver, logging, metrics, the engine.

Shipped in the Lambda layer next to ``baton``. Everything here is edge code: it reads the
environment once per container (through ``baton.settings``) and hands typed settings to the core.
"""
