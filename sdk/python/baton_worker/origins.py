"""Where a client's URL and API key came from, so that a refusal (401/403) or an unreachable
server says which setting to look at and how to change it.

The CLI names its options (``--url``, ``--api-key``), a program its arguments (``url=``,
``api_key=``); both name the environment variables and, for a server on this machine, the key
file a local ``baton dev`` keeps. Light module: standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from baton_worker.env import (
    DEFAULT_URL,
    ENV_API_KEY,
    ENV_URL,
    is_local_url,
    local_api_key,
    local_api_key_path,
)


@dataclass(frozen=True, slots=True)
class Options:
    """How a user of this client passes the URL and the key: ``--url``/``--api-key`` in the
    CLI, ``url=``/``api_key=`` in Python."""

    url: str = "url="
    api_key: str = "api_key="


PYTHON = Options()
CLI = Options("--url", "--api-key")


@dataclass(frozen=True, slots=True)
class Origins:
    """Where the URL and the key came from (``key`` None: no key was sent), in words for
    messages (``the --url option``, ``$BATON_API_KEY``, ``the key file /x/api-key``...), and
    how to set them."""

    url: str = "the url= argument"
    key: str | None = None
    options: Options = PYTHON
    key_file: str | None = None  # set when the key was read from this file

    def unreachable(self) -> str:
        """What to check when the server cannot be reached."""
        return (
            f"the URL comes from {self.url}; is a server running there? Set another with "
            f"{self.options.url} or ${ENV_URL}"
        )

    def refused(self, url: str, *, other_auth: object = None, signed: bool = False) -> str:
        """What to check when the server refused the credentials (401/403) sent with an API
        key, a SigV4 signature (``signed``) or another ``httpx.Auth`` (``other_auth``)."""
        if signed:
            return (
                "the request was signed with AWS SigV4 (botocore's credentials): the caller "
                "needs execute-api:Invoke on this API"
            )
        if other_auth is not None:
            return f"the request carried the credentials of {other_auth!r}"
        how = f"pass {self.options.api_key} or set ${ENV_API_KEY}"
        local = ""
        if is_local_url(url):
            path = self.key_file or os.path.abspath(local_api_key_path())
            local = f" (a local baton dev prints its key when it starts and keeps it in {path})"
        if self.key is None:
            return f"no API key was sent: {how}{local}"
        sent = f"the API key sent came from {self.key}"
        return f"{sent}; {how} with the key the server accepts{local}"


def resolve(
    url: str | None,
    api_key: str | None,
    *,
    options: Options = PYTHON,
    env: Mapping[str, str] | None = None,
    find_key: bool = True,
) -> tuple[str, str | None, Origins]:
    """The URL and key to use, explicit > environment > default (for a server on this
    machine, the key file of a local ``baton dev``), with where each came from.
    ``find_key=False``: the caller authenticates otherwise (SigV4); no key is looked for."""
    e = os.environ if env is None else env
    if url:
        url_from = _option(options.url)
    elif e.get(ENV_URL):
        url, url_from = e[ENV_URL], f"${ENV_URL}"
    else:
        url, url_from = DEFAULT_URL, f"the default ({DEFAULT_URL})"
    key_file = None
    key_from: str | None = None
    if not find_key:
        pass
    elif api_key:
        key_from = _option(options.api_key)
    elif e.get(ENV_API_KEY):
        api_key, key_from = e[ENV_API_KEY], f"${ENV_API_KEY}"
    else:
        api_key = local_api_key(url, e)
        key_file = os.path.abspath(local_api_key_path(e)) if api_key else None
        key_from = None if key_file is None else f"the key file {key_file} (${ENV_API_KEY} unset)"
    return url, api_key, Origins(url_from, key_from, options, key_file)


def _option(name: str) -> str:
    return f"the {name} option" if name.startswith("--") else f"the {name} argument"


__all__ = ["CLI", "PYTHON", "Options", "Origins", "resolve"]
