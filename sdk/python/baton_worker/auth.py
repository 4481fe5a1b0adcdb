"""Credentials for Baton's API: an API key, or AWS SigV4 for an IAM-protected API Gateway.

Both are ``httpx.Auth`` objects, so they plug into :class:`~baton_worker.client.BatonClient`
(``auth=``) or into any ``httpx`` client of your own.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import httpx

API_KEY_HEADER = "x-api-key"


class ApiKeyAuth(httpx.Auth):
    """Send ``x-api-key: <key>`` with every request (``baton dev``, API Gateway usage plans).

    ``reload`` (optional) reads the key again from where it came from: when the server refuses
    the key (401/403) and ``reload`` gives another one, the request is sent once more with it,
    and the new key is kept. A key read from a local ``baton dev``'s key file uses it, so a
    client outlives a server restarted with another key.
    """

    def __init__(self, api_key: str, *, reload: Callable[[], str | None] | None = None) -> None:
        if not api_key:
            raise ValueError("api_key must not be empty")
        self.api_key = api_key
        self._reload = reload

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        sent = self.api_key
        request.headers[API_KEY_HEADER] = sent
        response = yield request
        if response.status_code not in (401, 403) or self._reload is None:
            return
        fresh = self._reload()
        if fresh and fresh != sent:
            self.api_key = fresh
            request.headers[API_KEY_HEADER] = fresh
            yield request

    def __repr__(self) -> str:  # never print the key
        return "ApiKeyAuth(api_key='***')"


class AwsSigV4Auth(httpx.Auth):
    """Sign every request with AWS Signature Version 4 (botocore's ``SigV4Auth``).

    For an API Gateway whose methods use IAM authorization: ``service`` is ``execute-api`` and
    ``region`` the API's region. Credentials come from botocore's usual chain (environment,
    profile, SSO, instance or task role) unless given, and are re-read before each request, so
    refreshing credentials (roles) keep working. Needs the ``iam`` extra:
    ``pip install 'baton-worker[iam]'``.
    """

    requires_request_body = True
    # Only these are signed: a proxy on the way may rewrite hop-by-hop headers such as
    # ``connection``, which would break a signature that covered them.
    _SIGNED = ("content-type", API_KEY_HEADER)

    def __init__(
        self,
        *,
        region: str | None = None,
        service: str = "execute-api",
        credentials: Any = None,
        profile: str | None = None,
    ) -> None:
        try:
            import botocore.session
        except ImportError as e:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                "AWS SigV4 signing needs botocore: pip install 'baton-worker[iam]'"
            ) from e
        session = botocore.session.Session(profile=profile)
        self.region = region or session.get_config_variable("region")
        if not self.region:
            raise ValueError("no AWS region: pass region= or set AWS_REGION")
        self.service = service
        self._credentials = credentials if credentials is not None else session.get_credentials()
        if self._credentials is None:
            raise ValueError("no AWS credentials found (environment, profile or role)")

    def sign(self, request: httpx.Request) -> None:
        """Add ``Authorization``, ``X-Amz-Date`` (and the session token) to ``request``."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        frozen = getattr(self._credentials, "get_frozen_credentials", None)
        credentials = frozen() if frozen is not None else self._credentials
        headers = {k: v for k, v in request.headers.items() if k.lower() in self._SIGNED}
        aws = AWSRequest(
            method=request.method, url=str(request.url), data=request.content, headers=headers
        )
        SigV4Auth(credentials, self.service, self.region).add_auth(aws)
        for name, value in aws.headers.items():
            if name.lower() not in self._SIGNED:
                request.headers[name] = value

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        self.sign(request)
        yield request

    def __repr__(self) -> str:
        return f"AwsSigV4Auth(region={self.region!r}, service={self.service!r})"


__all__ = ["API_KEY_HEADER", "ApiKeyAuth", "AwsSigV4Auth"]
