"""Fake instances function: a bare handler that misbehaves on purpose."""

from __future__ import annotations

import json
import time


def handler(event, context):
    route = (event["httpMethod"], event["resource"])
    if route == ("POST", "/v1/instances"):
        raise RuntimeError("this handler always raises")
    if route == ("GET", "/v1/instances"):
        return {"statusCode": 200, "body": {"not": "a string"}}
    if route == ("GET", "/v1/instances/{id}"):
        time.sleep(float(event["pathParameters"]["id"]))
        return {"statusCode": 200, "body": json.dumps({"module": __name__})}
    return {
        "statusCode": 200,
        "headers": {"X-Single": "one", "Content-Type": "text/plain"},
        "multiValueHeaders": {"X-Multi": ["a", "b"]},
        "body": event["body"] or "",
    }
