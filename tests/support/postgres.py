"""A PostgreSQL the test controls: embedded (pgserver), stopped and started again on the same data
directory and socket, so its connection URI stays valid across the restart."""

from __future__ import annotations

import os
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Any

import psycopg

PG_CTL_TIMEOUT_SECONDS = 60


class ControlledPostgres:
    """pgserver's server, with ``stop()`` (a fast shutdown, as a failover or a crash recovery
    looks to clients) and ``start()`` on the same socket."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None
        self._socket_dir: str | None = None
        self.uri = ""

    def __enter__(self) -> ControlledPostgres:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not os.environ.get("XDG_RUNTIME_DIR"):
            os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="baton-xdg-")
        import pgserver

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._server = pgserver.get_server(self.data_dir, cleanup_mode="delete")
        info = self._server.get_postmaster_info()
        # pgserver listens on a unix socket only (no TCP); restart on the same one.
        self._socket_dir = str(info.socket_dir)
        self.uri = self._server.get_uri()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is None:
            return
        if not self.running():
            self.start()  # pgserver's cleanup stops the server it knows of, then deletes
        self._server._postmaster_info = self._postmaster_info()
        self._server.cleanup()
        self._server = None

    def _postmaster_info(self) -> Any:
        from pgserver.utils import PostmasterInfo

        return PostmasterInfo.read_from_pgdata(self.data_dir)

    def _pg_ctl(self, *args: str) -> None:
        from pgserver._commands import POSTGRES_BIN_PATH

        cmd = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.data_dir), *args]
        done = subprocess.run(
            cmd,
            user=self._server.system_user,  # pg_ctl refuses to run as root
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=PG_CTL_TIMEOUT_SECONDS + 10,
            check=False,
        )
        if done.returncode != 0:
            log = self.data_dir / "log"
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
            raise RuntimeError(
                f"pg_ctl {' '.join(args)} exited {done.returncode}: {done.stdout}\n"
                f"server log:\n{tail}"
            )

    def running(self) -> bool:
        info = self._postmaster_info()
        return bool(info is not None and info.is_running())

    def stop(self) -> None:
        """Fast shutdown: open sessions are terminated, new connections refused."""
        self._pg_ctl("-w", "-t", str(PG_CTL_TIMEOUT_SECONDS), "stop", "-m", "fast")

    def start(self) -> None:
        """Start again with pgserver's own options (same socket directory, same log)."""
        self._pg_ctl(
            "-w",
            "-t",
            str(PG_CTL_TIMEOUT_SECONDS),
            "-o",
            '-h ""',
            "-o",
            f"-k {self._socket_dir}",
            "-l",
            str(self.data_dir / "log"),
            "start",
        )

    def connect(self, dbname: str | None = None, **kwargs: Any) -> psycopg.Connection[Any]:
        from psycopg.conninfo import make_conninfo

        info = make_conninfo(self.uri, dbname=dbname) if dbname else self.uri
        return psycopg.connect(info, autocommit=True, **kwargs)
