"""How ``baton dev`` runs: its options, from the command line and the environment."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from baton import settings as env_names
from baton.local.functions import DEFAULT_MAX_CONTAINERS

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_GRPC_PORT = 9090  # gRPC's customary port (0: no gRPC server)
DEFAULT_DATA_DIR = Path(".baton/data")
DEFAULT_TICK_SECONDS = 1.0
DEFAULT_PAYLOAD_BUCKET = "baton-payloads"
MAX_CONCURRENCY = 1000  # Lambda's default concurrency for a whole account


class OptionError(ValueError):
    """A command-line option or environment variable has an unusable value."""


@dataclass(frozen=True, slots=True)
class DevOptions:
    """How ``baton dev`` runs. ``None`` means: the runtime provides it (see each field)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    grpc_port: int = DEFAULT_GRPC_PORT
    data_dir: Path = DEFAULT_DATA_DIR
    tick_seconds: float = DEFAULT_TICK_SECONDS
    functions_dir: Path | None = None  # None: <repo>/functions
    api_key: str | None = None  # None: the key kept in data_dir (generated at the first start)
    database_url: str | None = None  # None: embedded PostgreSQL under data_dir
    s3_endpoint: str | None = None  # None: moto's server in this process
    payload_bucket: str = DEFAULT_PAYLOAD_BUCKET
    concurrency: int = DEFAULT_MAX_CONTAINERS  # concurrent invocations per function

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> DevOptions:
        """Options from ``env`` (default ``os.environ``); overrides that are not None win."""
        e = os.environ if env is None else env
        base = cls()
        values: dict[str, Any] = {
            "host": e.get(env_names.ENV_HOST) or base.host,
            "port": _number(e, env_names.ENV_PORT, int, base.port),
            "grpc_port": _number(e, env_names.ENV_GRPC_PORT, int, base.grpc_port),
            "data_dir": Path(e.get(env_names.ENV_DATA_DIR) or base.data_dir),
            "tick_seconds": _number(e, env_names.ENV_TICK_SECONDS, float, base.tick_seconds),
            "functions_dir": _path(e.get(env_names.ENV_FUNCTIONS_DIR)),
            "api_key": e.get(env_names.ENV_API_KEY) or None,
            "database_url": e.get(env_names.ENV_DATABASE_URL) or None,
            "s3_endpoint": e.get(env_names.ENV_S3_ENDPOINT) or None,
            "payload_bucket": e.get(env_names.ENV_PAYLOAD_BUCKET) or base.payload_bucket,
            "concurrency": _number(e, env_names.ENV_LOCAL_CONCURRENCY, int, base.concurrency),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        options = replace(base, **values)
        options.validate()
        return options

    def validate(self) -> None:
        if not 0 <= self.port <= 65535:
            raise OptionError(f"port must be between 0 and 65535, not {self.port}")
        if not 0 <= self.grpc_port <= 65535:
            raise OptionError(f"gRPC port must be between 0 and 65535, not {self.grpc_port}")
        if not self.tick_seconds > 0:
            raise OptionError(f"tick seconds must be positive, not {self.tick_seconds}")
        if not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise OptionError(
                f"concurrency must be between 1 and {MAX_CONCURRENCY}, not {self.concurrency}"
            )


def _number(env: Mapping[str, str], name: str, kind: Callable[[str], Any], default: Any) -> Any:
    raw = env.get(name)
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise OptionError(f"{name}={raw!r} is not a valid {kind.__name__}") from None


def _path(raw: str | None) -> Path | None:
    return Path(raw) if raw else None
