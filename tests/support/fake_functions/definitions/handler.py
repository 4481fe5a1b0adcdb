"""Fake definitions function: a Powertools REST resolver, like the real ones."""

from __future__ import annotations

import json
import os

import psycopg
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from baton import settings

app = APIGatewayRestResolver()


def _db() -> psycopg.Connection:
    conn = psycopg.connect(os.environ[settings.ENV_DATABASE_URL], autocommit=True)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS fake_definition (name text PRIMARY KEY, body jsonb NOT NULL)"
    )
    return conn


@app.post("/v1/definitions")
def register():
    body = app.current_event.json_body
    with _db() as conn:
        conn.execute(
            "INSERT INTO fake_definition VALUES (%s, %s) "
            "ON CONFLICT (name) DO UPDATE SET body = excluded.body",
            (body["name"], json.dumps(body)),
        )
    return Response(201, "application/json", json.dumps(body))


@app.get("/v1/definitions/<name>")
def latest(name: str):
    with _db() as conn:
        row = conn.execute("SELECT body FROM fake_definition WHERE name = %s", (name,)).fetchone()
    if row is None:
        return Response(404, "application/problem+json", json.dumps({"status": 404}))
    return row[0]


def _echo():
    ctx = app.lambda_context
    return {
        "event": app.current_event.raw_event,
        "context": {
            "function_name": ctx.function_name,
            "function_version": ctx.function_version,
            "invoked_function_arn": ctx.invoked_function_arn,
            "memory_limit_in_mb": ctx.memory_limit_in_mb,
            "aws_request_id": ctx.aws_request_id,
            "log_group_name": ctx.log_group_name,
            "log_stream_name": ctx.log_stream_name,
            "remaining_ms": ctx.get_remaining_time_in_millis(),
        },
        "env": {
            name: os.environ.get(name)
            for name in (
                settings.ENV_STAGE,
                settings.ENV_S3_ENDPOINT,
                settings.ENV_PAYLOAD_BUCKET,
                settings.ENV_DATABASE_URL,
            )
        },
        "module": __name__,
    }


app.get("/v1/taskdefs/<name>")(lambda name: _echo())
app.put("/v1/taskdefs/<name>")(lambda name: _echo())


@app.get("/v1/taskdefs")
def binary():
    return Response(200, "application/octet-stream", bytes(range(256)))


def handler(event, context):
    return app.resolve(event, context)
