"""baton.httpcall without a database: the address guard (IPv4, IPv6, IPv4-mapped, names that
resolve to forbidden addresses, the allow list, AWS against local), the request read from a
resolved ``request``, and calls to a local server bounded in time and size."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from baton.httpcall import (
    AddressPolicy,
    CallFailed,
    Limits,
    Refused,
    RequestInvalid,
    call,
    parse_request,
    request_problems,
)
from baton.httpcall.guard import checked_addresses

from tests.support.http_target import Target, http_target

LOCAL = AddressPolicy(private_allowed=True)
AWS = AddressPolicy(private_allowed=False)


def _refusal(policy: AddressPolicy, address: str) -> str | None:
    try:
        policy.check(ipaddress.ip_address(address))
    except Refused as e:
        return str(e)
    return None


@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("169.254.169.254", "169.254.169.254 is an instance-metadata address"),
        ("fd00:ec2::254", "fd00:ec2::254 is an instance-metadata address"),
        ("169.254.1.2", "169.254.1.2 is a link-local address"),
        ("fe80::1", "fe80::1 is a link-local address"),
        ("::ffff:169.254.169.254", "169.254.169.254 is an instance-metadata address"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254 is an instance-metadata address"),
        ("224.0.0.1", "224.0.0.1 is not a unicast address"),
        ("240.0.0.1", "240.0.0.1 is not a unicast address"),
    ],
)
def test_always_refused(address: str, said: str) -> None:
    assert _refusal(LOCAL, address) == said
    assert _refusal(AWS, address) == said


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.9", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("0.0.0.0", "unspecified"),
    ],
)
def test_loopback_and_private_refused_on_aws_allowed_locally(address: str, kind: str) -> None:
    assert _refusal(LOCAL, address) is None
    said = _refusal(AWS, address)
    assert said is not None and kind in said


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1::", "172.32.0.1"])
def test_public_addresses_pass(address: str) -> None:
    assert _refusal(AWS, address) is None


def test_the_allow_list_lets_through_networks_and_host_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = AddressPolicy.of(
        ["10.20.0.0/16", "169.254.170.2", " internal.example.com ", ""], private_allowed=False
    )
    assert _refusal(policy, "10.20.3.4") is None
    assert _refusal(policy, "169.254.170.2") is None
    assert _refusal(policy, "10.21.0.1") is not None
    _resolving(monkeypatch, {"internal.example.com": ["10.99.0.1"]})
    assert checked_addresses(policy, "internal.example.com", 80) == [
        ipaddress.ip_address("10.99.0.1")
    ]
    with pytest.raises(ValueError, match="neither a CIDR"):
        AddressPolicy.of(["not a host!"], private_allowed=False)


def _resolving(monkeypatch: pytest.MonkeyPatch, names: dict[str, list[str]]) -> None:
    def fake(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host not in names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in names[host]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", fake)


def test_a_name_resolving_to_a_forbidden_address_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _resolving(
        monkeypatch,
        {
            "metadata.evil.test": ["169.254.169.254"],
            "mixed.evil.test": ["93.184.216.34", "fd00:ec2::254"],
            "v6.evil.test": ["fe80::1%eth0"],
        },
    )
    with pytest.raises(Refused) as e:
        checked_addresses(LOCAL, "metadata.evil.test", 80)
    assert str(e.value) == (
        "refused: metadata.evil.test resolves to 169.254.169.254 is an instance-metadata address"
    )
    with pytest.raises(Refused, match="fd00:ec2::254 is an instance-metadata"):
        checked_addresses(LOCAL, "mixed.evil.test", 80)
    with pytest.raises(Refused, match="fe80::1 is a link-local"):
        checked_addresses(LOCAL, "v6.evil.test", 80)
    # the call connects to what was checked: a refusal happens before any connection
    with pytest.raises(CallFailed) as failed:
        call(parse_request({"uri": "http://metadata.evil.test/"}), LOCAL)
    assert failed.value.retryable is False
    assert str(failed.value).startswith("refused: metadata.evil.test resolves to")


def test_the_call_connects_to_the_checked_address_keeping_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with http_target() as target:
        _resolving(monkeypatch, {"service.test": ["127.0.0.1"]})
        out = call(parse_request({"uri": f"http://service.test:{target.port}/json"}), LOCAL)
        assert out["response"]["statusCode"] == 200
        assert target.requests[0]["headers"]["Host"] == f"service.test:{target.port}"
        # the same name on AWS: loopback refused before connecting
        with pytest.raises(
            CallFailed, match=r"service\.test resolves to 127\.0\.0\.1 is a loopback"
        ):
            call(parse_request({"uri": f"http://service.test:{target.port}/json"}), AWS)
        assert len(target.requests) == 1


def test_request_building() -> None:
    r = parse_request(
        {
            "uri": "https://api.example.com/x?y=1",
            "method": "post",
            "headers": {"X-N": 5, "Authorization": "Bearer t"},
            "body": {"a": [1, "é"]},
            "connectionTimeOut": 250,
            "readTimeOut": 1500,
        }
    )
    assert r.method == "POST"
    assert r.body == '{"a":[1,"é"]}'.encode()
    assert r.headers == {
        "X-N": "5",
        "Authorization": "Bearer t",
        "Accept": "application/json",
        "Content-Type": "application/json",
    }
    assert (r.connect_ms, r.read_ms) == (250, 1500)
    text = parse_request(
        {"uri": "http://h/", "method": "PUT", "body": "raw", "contentType": "text/plain"}
    )
    assert text.body == b"raw" and text.headers["Content-Type"] == "text/plain"
    assert parse_request({"uri": "http://h/", "body": {"ignored": 1}}).body is None  # a GET
    with pytest.raises(RequestInvalid, match="line break"):
        parse_request({"uri": "http://h/", "headers": {"X": "a\r\nEvil: 1"}})
    with pytest.raises(RequestInvalid, match="http:// or https://"):
        parse_request({"uri": "file:///etc/passwd"})
    with pytest.raises(RequestInvalid, match="readTimeOut is 1 to 60000"):
        parse_request({"uri": "http://h/", "readTimeOut": 600_000})
    with pytest.raises(RequestInvalid, match="not an object"):
        parse_request("http://h/")


def test_registration_problems_skip_expressions() -> None:
    assert list(request_problems({"uri": "${workflow.input.u}", "readTimeOut": "${x}"})) == []
    assert dict(request_problems({"method": "FETCH", "uri": "gopher://h"})) == {
        "method": "method is one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, not 'FETCH'",
        "uri": "uri must be http:// or https://, not gopher",
    }
    assert dict(request_problems({})) == {"uri": "request.uri is required"}


@pytest.fixture
def target() -> Iterator[Target]:
    with http_target() as t:
        yield t


def test_read_timeout_and_size_cap(target: Target) -> None:
    started = time.monotonic()
    with pytest.raises(CallFailed, match="no answer within readTimeOut 200 ms") as e:
        call(parse_request({"uri": target.url("/hold"), "readTimeOut": 200}), LOCAL)
    assert e.value.retryable
    assert time.monotonic() - started < 10  # bounded by the timeout, not the server
    with pytest.raises(CallFailed, match="above the limit of 1024 bytes") as big:
        call(parse_request({"uri": target.url("/big")}), LOCAL, Limits(max_response_bytes=1024))
    assert not big.value.retryable


def test_a_trickling_server_is_bounded_by_the_whole_exchange() -> None:
    """A server that sends a byte at a time, each within readTimeOut, still ends by the
    deadline of connect + read timeouts."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        while not stop.is_set():
            try:
                conn.sendall(b"x")
            except OSError:
                break
            stop.wait(0.05)
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    try:
        with pytest.raises(CallFailed, match="no answer within readTimeOut"):
            call(
                parse_request(
                    {
                        "uri": f"http://127.0.0.1:{port}/",
                        "connectionTimeOut": 200,
                        "readTimeOut": 300,
                    }
                ),
                LOCAL,
            )
    finally:
        stop.set()
        listener.close()


def test_registration_refuses_bad_requests_and_reserved_job_types() -> None:
    from baton.definitions import parse_definition
    from baton.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as e:
        parse_definition(
            {
                "name": "bad",
                "steps": [
                    {
                        "id": "call",
                        "type": "HTTP",
                        "request": {
                            "uri": "ftp://h/",
                            "readTimeOut": 0,
                            "method": "${workflow.input.m}",
                        },
                    },
                    {"id": "steal", "type": "SERVICE_TASK", "jobType": "baton:http"},
                    {"id": "half", "type": "HTTP", "request": "http://${workflow.input.h}/"},
                    {"id": "none", "type": "HTTP", "request": {"method": "GET"}},
                ],
            }
        )
    found = {p.path: p.message for p in e.value.problems}
    assert found["steps[0].request.uri"] == "uri must be http:// or https://, not ftp"
    assert found["steps[0].request.readTimeOut"] == "readTimeOut is 1 to 60000 milliseconds, not 0"
    assert "steps[0].request.method" not in found  # an expression: checked when resolved
    assert "the engine's own" in found["steps[1].jobType"]
    assert found["steps[2].request"] == "request is an object, or one ${…} expression giving one"
    assert found["steps[3].request.uri"] == "request.uri is required"


def test_settings_allow_private_ranges_only_locally() -> None:
    from baton.settings import Settings, SettingsError

    local = Settings.from_env({}).engine
    assert local.http_private_allowed and local.http_allow == ()
    aws = Settings.from_env(
        {"BATON_STAGE": "prod", "BATON_HTTP_ALLOW": " 10.20.0.0/16, orders.internal ,"}
    ).engine
    assert not aws.http_private_allowed
    assert aws.http_allow == ("10.20.0.0/16", "orders.internal")
    with pytest.raises(SettingsError, match="BATON_HTTP_MAX_RESPONSE_BYTES"):
        Settings.from_env({"BATON_HTTP_MAX_RESPONSE_BYTES": "10"})
    with pytest.raises(SettingsError, match="BATON_HTTP_CONCURRENCY"):
        Settings.from_env({"BATON_HTTP_CONCURRENCY": "0"})
