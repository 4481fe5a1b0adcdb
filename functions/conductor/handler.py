"""Conductor-compatible API under ``/api``: what conductor-python 2.0.0's workers, metadata
client and workflow client call, over Baton's engine. The routes live in
``baton_lambda.conductor`` (one module per group); each import of this module (a Lambda
container) builds its own API."""

from __future__ import annotations

from baton_lambda.conductor import conductor_api

api = conductor_api()
handler = api.handler()
