"""The data directory of ``baton dev``: one server owns it at a time, and it keeps the API key.

Ownership is an exclusive ``flock`` on ``baton-dev.lock``, held for the life of the process: the
kernel releases it when the process ends however it ends (a ``kill -9`` included), so a crash
never leaves the directory locked, and a second server on the same directory is refused with the
first one's pid and port instead of both writing the same database and bucket.

The key file always holds the key the server accepts: the worker SDK and the CLI read it
(``baton_worker.env``) when ``BATON_API_KEY`` is unset, so a key chosen with ``BATON_API_KEY``
is written there too, replacing the one kept from an earlier start.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from baton import settings as env_names
from baton.local.options import DevOptions, OptionError

log = logging.getLogger("baton.local.datadir")

LOCK_FILE = "baton-dev.lock"
# The generated API key, kept in the data directory (0600) so it survives restarts; the worker
# SDK and the CLI read the same file (``baton_worker.env``) when BATON_API_KEY is unset.
API_KEY_FILE = "api-key"
_USABLE_KEY = re.compile(r"[!-~]{8,256}")  # visible ASCII: it travels in an HTTP header
_CHOSEN_KEY = re.compile(r"[!-~]{1,256}")  # one line of the key file, as clients read it


class DataDirInUse(OptionError):
    """Another ``baton dev`` is running on the same data directory."""


class DataDirLock:
    """The exclusive hold of one ``baton dev`` on its data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, *, port: int) -> None:
        """Hold the directory (creating it), or raise DataDirInUse naming the holder."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise OptionError(f"cannot use the data directory {self.data_dir}: {e}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise DataDirInUse(
                f"the data directory {self.data_dir.resolve()} is in use by another baton dev "
                f"({holder}); stop that one, or give this one a directory of its own with "
                f"--data-dir or {env_names.ENV_DATA_DIR}"
            ) from None
        owner = {"pid": os.getpid(), "port": port, "since": datetime.now(UTC).isoformat()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(owner) + "\n").encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = None


def _holder(fd: int) -> str:
    try:
        owner = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {int(owner['pid'])}, port {int(owner['port'])}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its pid is not recorded yet"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """The key the local server accepts, and where it came from (for the banner)."""

    value: str
    source: str


def api_key_path(data_dir: Path) -> Path:
    return data_dir / API_KEY_FILE


def resolve_api_key(options: DevOptions) -> ApiKey:
    """``BATON_API_KEY`` when set (written to the key file, so clients that read the file send
    it); else the key kept in the data directory, generated at the first start. The file is
    readable by its owner only (0600)."""
    path = api_key_path(options.data_dir)
    if options.api_key:
        if not _CHOSEN_KEY.fullmatch(options.api_key):
            raise OptionError(
                f"{env_names.ENV_API_KEY} must be 1-256 visible ASCII characters, without spaces"
            )
        kept = _read_kept(path, quiet=True)
        if kept == options.api_key:
            _make_private(path)
            where = f"kept in {path}"
        else:
            _write_private(path, options.api_key + "\n")
            where = f"written to {path}" + (", replacing the key kept there" if kept else "")
        return ApiKey(
            options.api_key, f"from {env_names.ENV_API_KEY}; {where} for the CLI and the SDK"
        )
    kept = _read_kept(path)
    if kept:
        if not _USABLE_KEY.fullmatch(kept):
            raise OptionError(
                f"the API key in {path} is not 8-256 visible ASCII characters; "
                "fix it, or delete the file to have a new one generated"
            )
        _make_private(path)
        return ApiKey(kept, f"kept in {path}; set {env_names.ENV_API_KEY} to choose one")
    value = secrets.token_urlsafe(24)
    _write_private(path, value + "\n")
    return ApiKey(value, f"generated, kept in {path}; set {env_names.ENV_API_KEY} to choose one")


def _read_kept(path: Path, *, quiet: bool = False) -> str | None:
    """The key in the file (None: no file); unreadable is an error unless ``quiet``."""
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        if quiet:
            return ""
        raise OptionError(f"cannot read the API key in {path}: {e}") from None


def _make_private(path: Path) -> None:
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)  # a credential: readable by its owner only
    except OSError:
        log.warning("cannot restrict the permissions of %s", path)


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, replacing it in one step."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask
            os.write(fd, text.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(staging, path)
    except OSError as e:
        raise OptionError(f"cannot keep the API key in {path}: {e.strerror or e}") from None
