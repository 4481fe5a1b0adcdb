"""The engine: definitions compiled to plans, the decider, retry policy, and the service."""
