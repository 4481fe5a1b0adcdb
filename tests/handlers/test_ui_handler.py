"""The viewer's static function: content types, caching, CSP, and nothing outside its folder."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.lambda_events import FakeContext, api_event, load_function

ui = load_function("ui")


def call(path: str, asset: str | None = None, **headers: str) -> dict[str, Any]:
    resource = "/ui/{asset}" if asset is not None else "/ui"
    event = api_event("GET", resource, {"asset": "x"} if asset is not None else None)
    if asset is None:
        event["path"] = path
    else:  # as API Gateway decodes it (the helper cannot quote a lone surrogate)
        event["pathParameters"] = {"asset": asset}
    event["headers"] = {**(event.get("headers") or {}), **headers}
    return dict(ui.handler(event, FakeContext()))


def test_the_page_is_html_with_a_strict_csp_and_no_inline_script() -> None:
    r = call("/ui/")
    assert r["statusCode"] == 200
    h = r["headers"]
    assert h["Content-Type"] == "text/html; charset=utf-8"
    csp = h["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert h["X-Content-Type-Options"] == "nosniff"
    assert h["Cache-Control"] == "no-cache" and h["ETag"]
    html = r["body"]
    assert '<script src="app.js" defer></script>' in html
    # No inline script or style, and nothing from another origin.
    assert html.count("<script") == 1 and "<style" not in html and " style=" not in html
    assert "http://" not in html and "https://" not in html


@pytest.mark.parametrize(
    ("asset", "content_type"),
    [
        ("app.js", "text/javascript; charset=utf-8"),
        ("app.css", "text/css; charset=utf-8"),
        ("index.html", "text/html; charset=utf-8"),
    ],
)
def test_assets_have_their_content_type(asset: str, content_type: str) -> None:
    r = call("", asset)
    assert r["statusCode"] == 200
    assert r["headers"]["Content-Type"] == content_type
    assert r["body"] and r["isBase64Encoded"] is False


def test_without_the_trailing_slash_the_page_redirects_relative_to_the_stage() -> None:
    r = call("/ui")
    assert r["statusCode"] == 301
    assert r["headers"]["Location"] == "ui/"


def test_an_unchanged_asset_is_a_304() -> None:
    etag = call("", "app.js")["headers"]["ETag"]
    r = call("", "app.js", **{"If-None-Match": etag})
    assert r["statusCode"] == 304 and r["body"] == ""
    assert call("", "app.js", **{"if-none-match": '"other"'})["statusCode"] == 200


@pytest.mark.parametrize(
    "asset",
    [
        "nope.js",
        "..",
        "../handler.py",
        "..%2Fhandler.py",
        "handler.py",
        "app.js\x00.html",
        "\x00",
        ".app.js",
        "app.js/",
        "/etc/passwd",
        "static",
        "x" * 5000,
        "\ud835",
    ],
)
def test_unknown_assets_and_traversal_are_404_problems(asset: str) -> None:
    r = call("", asset)
    assert r["statusCode"] == 404
    assert r["headers"]["Content-Type"] == "application/problem+json"
    assert "Content-Security-Policy" in r["headers"]


def test_only_get_is_served() -> None:
    event = api_event("POST", "/ui/{asset}", {"asset": "app.js"})
    assert ui.handler(event, FakeContext())["statusCode"] == 405


def test_odd_events_are_never_a_500() -> None:
    for event in ({}, {"pathParameters": "x"}, {"pathParameters": {"asset": 3}}, {"headers": 1}):
        assert ui.handler(event, FakeContext())["statusCode"] < 500


def test_the_local_router_serves_the_viewer_as_a_directory_and_nothing_else() -> None:
    from baton.local.events import NoRoute, RouteMatch, RouteTable

    table = RouteTable()
    for path in ("/ui", "/ui/"):
        match = table.match("GET", path)
        assert isinstance(match, RouteMatch) and match.route.function == "ui", path
    asset = table.match("GET", "/ui/app.js")
    assert isinstance(asset, RouteMatch) and asset.path_parameters == {"asset": "app.js"}
    assert isinstance(table.match("GET", "/v1/definitions/"), NoRoute)
    assert isinstance(table.match("GET", "/ui/a/b"), NoRoute)


@pytest.mark.parametrize(
    ("sent", "location"),
    [
        ("/prod/", "ui/"),  # the stage URL with its slash: ui/ beside it
        ("/prod", "prod/ui/"),  # without: a browser would resolve ui/ beside "prod"
        ("/", "ui/"),  # a custom domain's root, or the local server
        (None, "ui/"),
    ],
)
def test_the_root_redirects_to_the_viewer_under_the_stage(sent: str | None, location: str) -> None:
    event = api_event("GET", "/", None)
    event["path"] = "/"
    if sent is None:
        event.pop("requestContext", None)
    else:
        event.setdefault("requestContext", {})["path"] = sent
    r = ui.handler(event, FakeContext())
    assert r["statusCode"] == 302
    assert r["headers"]["Location"] == location
    assert "Content-Security-Policy" in r["headers"]


def test_the_local_router_and_the_gateway_serve_the_root_with_the_viewer() -> None:
    from baton.local.events import RouteMatch, RouteTable
    from baton.routes import SERVED_ROUTES

    match = RouteTable().match("GET", "/")
    assert isinstance(match, RouteMatch) and match.route.function == "ui" and match.route.public
    assert [r for r in SERVED_ROUTES if r.path == "/"] == [match.route]
