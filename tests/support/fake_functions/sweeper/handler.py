"""Fake scheduled function: records each scheduled event and then fails."""

from __future__ import annotations

import json
import os

import psycopg
from baton import settings


def handler(event, context):
    with psycopg.connect(os.environ[settings.ENV_DATABASE_URL], autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS fake_tick (function text NOT NULL, event jsonb NOT NULL)"
        )
        conn.execute(
            "INSERT INTO fake_tick VALUES (%s, %s)", (context.function_name, json.dumps(event))
        )
    raise RuntimeError("the sweeper fails after recording")
