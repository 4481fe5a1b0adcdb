"""A minimal Connect client for the tests: one unary call in binary or JSON, the answer as REST
JSON (or the error body), over httpx."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
from baton.rpc import convert, schema
from google.protobuf import json_format

SERVICE = schema.SERVICE_NAME
PROTO = "application/proto"
JSON = "application/json"


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any  # the response message as REST JSON, or the Connect error body
    raw: httpx.Response

    @property
    def code(self) -> str | None:
        return self.body.get("code") if self.status != 200 else None


def call(
    client: httpx.Client, rpc: str, request: dict[str, Any], codec: str, key: str | None
) -> Answer:
    method = schema.method(rpc)
    assert method is not None, rpc
    message = schema.message_class(method.input_type.full_name)()
    json_format.ParseDict(request, message)
    headers = {"Content-Type": codec, "Connect-Protocol-Version": "1"}
    if key is not None:
        headers["x-api-key"] = key
    body = message.SerializeToString() if codec == PROTO else json.dumps(request).encode()
    r = client.post(f"/rpc/{SERVICE}/{rpc}", content=body, headers=headers)
    if r.status_code != 200:
        assert r.headers["content-type"].startswith(JSON), r.text
        return Answer(r.status_code, r.json(), r)
    assert r.headers["content-type"] == codec
    response = schema.message_class(method.output_type.full_name)()
    if codec == PROTO:
        response.ParseFromString(r.content)
    else:  # the canonical proto3 JSON must parse strictly into the message
        json_format.Parse(r.text, response, ignore_unknown_fields=False)
    return Answer(200, convert.to_json(response), r)
