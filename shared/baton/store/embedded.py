"""Embedded PostgreSQL (the ``pgserver`` package) for the local runtime and the tests."""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class EmbeddedPostgres:
    """A PostgreSQL 16 server whose data lives in ``data_dir`` (kept across restarts)."""

    def __init__(self, data_dir: str | Path, *, keep_data: bool = True) -> None:
        self.data_dir = Path(data_dir)
        self._keep = keep_data
        self._server: Any = None

    def start(self) -> str:
        """Start (or attach to) the server and return its connection URI."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # pgserver asks platformdirs for a runtime dir at import and writes into it; CI machines
        # often have none. Never the data dir itself: initdb wants that one empty.
        if not os.environ.get("XDG_RUNTIME_DIR"):
            os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="baton-xdg-")
        try:
            import pgserver
        except ImportError as e:  # pragma: no cover - the local extra is not installed
            raise RuntimeError(
                "embedded PostgreSQL needs the 'pgserver' package: pip install 'baton[local]', "
                "or set DATABASE_URL"
            ) from e
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._server = pgserver.get_server(  # type: ignore[attr-defined]
                self.data_dir, cleanup_mode="stop" if self._keep else "delete"
            )
        uri: str = self._server.get_uri()
        log.info("embedded postgres ready", extra={"data_dir": str(self.data_dir)})
        return uri

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None
