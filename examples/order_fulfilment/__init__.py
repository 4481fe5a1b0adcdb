"""The order-fulfilment example: a definition (``definition.json``) and its worker (``worker``)."""
