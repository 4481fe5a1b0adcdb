"""The execution viewer: serves the static page and its assets under ``/ui/``.

The assets (``static/``, packaged with the function) are read once per container. Only names of
that folder are served: an asset name is one path segment of letters, digits, ``-``, ``_`` and
``.``, and must be a file the folder lists at cold start, so neither ``..`` nor an encoded slash
nor a NUL byte reaches the file system. The page holds no data and needs no key; the API calls it
makes from the browser carry the user's key like any other client.

``GET /`` (the API's root) redirects to the viewer, relative to where the client is, so the
stage or base path in front of the API in AWS (``/prod/``) is kept.

Headers: the right ``Content-Type``; a strict Content-Security-Policy (scripts and styles from
this origin only, no inline script, API calls to this origin only, no framing); ``no-cache`` and
an ``ETag`` on every asset (a few tens of kilobytes: the browser revalidates and gets a 304, so a
deploy is seen at once and an unchanged asset is not sent again).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

STATIC_DIR = Path(__file__).resolve().parent / "static"
INDEX = "index.html"

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
}
_TEXT = (".html", ".js", ".css", ".svg", ".json")

CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
}
_ASSET_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _load(directory: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted(directory.iterdir())
        if p.is_file() and p.suffix in CONTENT_TYPES and _ASSET_NAME.fullmatch(p.name)
    }


ASSETS: dict[str, bytes] = _load(STATIC_DIR)


def _problem(status: int, title: str, detail: str, path: str) -> dict[str, Any]:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    if path:
        body["instance"] = path
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/problem+json", **SECURITY_HEADERS},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


ETAGS: dict[str, str] = {n: f'"{hashlib.sha256(d).hexdigest()[:32]}"' for n, d in ASSETS.items()}


def _if_none_match(event: dict[str, Any]) -> str | None:
    headers = event.get("headers") or {}
    if not isinstance(headers, dict):
        return None
    return next((str(v) for k, v in headers.items() if str(k).lower() == "if-none-match"), None)


def _asset(name: str, event: dict[str, Any]) -> dict[str, Any]:
    data = ASSETS[name]
    suffix = Path(name).suffix
    headers = {
        "Content-Type": CONTENT_TYPES[suffix],
        "Cache-Control": "no-cache",
        "ETag": ETAGS[name],
        **SECURITY_HEADERS,
    }
    wanted = _if_none_match(event)
    if wanted and ETAGS[name] in (t.strip() for t in wanted.split(",")):
        return {"statusCode": 304, "headers": headers, "body": "", "isBase64Encoded": False}
    if suffix in _TEXT:
        body, encoded = data.decode(), False
    else:
        body, encoded = base64.b64encode(data).decode(), True
    return {"statusCode": 200, "headers": headers, "body": body, "isBase64Encoded": encoded}


def _redirect(status: int, location: str) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Location": location, "Cache-Control": "no-cache", **SECURITY_HEADERS},
        "body": "",
        "isBase64Encoded": False,
    }


def _root_location(event: dict[str, Any]) -> str:
    """Where ``GET /`` sends the browser: ``ui/``, relative to the URL it asked for. API Gateway
    routes both ``…/prod/`` and ``…/prod`` here; for the second, a browser resolves ``ui/``
    beside ``prod``, so the last segment of the path the client sent leads."""
    context = event.get("requestContext")
    sent = context.get("path") if isinstance(context, dict) else None
    if isinstance(sent, str) and sent and not sent.endswith("/"):
        last = sent.rsplit("/", 1)[-1]
        if _ASSET_NAME.fullmatch(last):
            return f"{last}/ui/"
    return "ui/"


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    method = str(event.get("httpMethod") or "GET").upper()
    path = str(event.get("path") or "")
    if method not in ("GET", "HEAD"):
        return _problem(405, "Method Not Allowed", f"{method} is not allowed here", path)
    if event.get("resource") == "/" or path == "/":
        return _redirect(302, _root_location(event))
    params = event.get("pathParameters") or {}
    asset = params.get("asset") if isinstance(params, dict) else None
    if asset is None:
        if not path.endswith("/"):
            # /ui -> ui/, relative, so the stage prefix in AWS (/prod/ui) is kept.
            return _redirect(301, "ui/")
        asset = INDEX
    if not isinstance(asset, str) or not _ASSET_NAME.fullmatch(asset) or asset not in ASSETS:
        return _problem(404, "Not Found", "no such asset of the viewer", path)
    return _asset(asset, event)
