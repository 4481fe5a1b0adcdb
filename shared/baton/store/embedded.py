"""Embedded PostgreSQL for the local runtime and the tests: the PostgreSQL 16 binaries of the
``pgserver`` package, run by this module.

The process that calls ``start()`` owns the server, and ``stop()`` stops it (a fast shutdown).
pg_ctl detaches the postmaster, so it outlives a process killed outright (``kill -9``); the next
``start()`` on the same data directory finds it through ``postmaster.pid``, stops it (saying so:
``orphan`` holds its pid) and starts a server of its own, so stopping that one stops the
database. One process at a time may use a data directory (``baton dev`` holds a lock on its own).

PostgreSQL refuses to run as root: as root the server runs as a system user (``pgserver`` unless
told otherwise; created with ``useradd`` at the first start on a machine, as the pgserver package
does), which must be able to reach the data directory. That machine-wide setup is serialized by a
file lock, so processes setting up at once (two ``baton dev`` on a new machine) do not race.

A new cluster is made (``initdb``) next to the data directory and renamed into it, so an
initialization cut short never leaves a half-made cluster behind.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

from baton.errors import BatonError

log = logging.getLogger(__name__)

SYSTEM_USER = "pgserver"  # the pgserver package's: clusters it made stay usable
PG_CTL_TIMEOUT_SECONDS = 60
_SOCKET_NAME = ".s.PGSQL.5432"
_MAX_SOCKET_PATH = 100  # a unix socket's path: 108 bytes on Linux, 104 on macOS
_SETUP_LOCK = "baton-embedded-postgres.lock"
_USERADD_EXISTS = 9  # useradd's exit status for "the user already exists"


class EmbeddedPostgresError(BatonError):
    """The embedded PostgreSQL cannot be set up, started or stopped."""

    title = "Embedded PostgreSQL failed"


class EmbeddedPostgres:
    """A PostgreSQL server whose data lives in ``data_dir`` (kept unless ``keep_data=False``)."""

    def __init__(
        self, data_dir: str | Path, *, keep_data: bool = True, system_user: str | None = None
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self._keep = keep_data
        self._root_user = system_user or SYSTEM_USER  # whom the server runs as, under root
        self._user: str | None = None
        self._bin = Path()
        self._socket_dir: Path | None = None
        self._running = False
        # The pid of a server a process that did not stop it left running, stopped by start().
        self.orphan: int | None = None

    def start(self) -> str:
        """Start the server (initializing the data directory if new); its connection URI."""
        self._bin = _bin_dir()
        if os.name == "posix" and os.geteuid() == 0:
            self._user = self._root_user
            with _machine_lock():
                _set_up_for_root(self._user, self._bin, self.data_dir)
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        self.orphan = self._stop_orphan()
        self._socket_dir = self._choose_socket_dir()
        self._pg_ctl(
            "-w",
            "-t",
            str(PG_CTL_TIMEOUT_SECONDS),
            "-o",
            '-h ""',  # no TCP: the unix socket only
            "-o",
            f"-k {shlex.quote(str(self._socket_dir))}",
            "-l",
            str(self.data_dir / "log"),
            "start",
        )
        self._running = True
        log.info("embedded postgres ready", extra={"data_dir": str(self.data_dir)})
        return f"postgresql://postgres:@/postgres?host={quote(str(self._socket_dir), safe='/')}"

    def stop(self) -> None:
        """Stop the server this object started (and delete its data unless kept)."""
        if not self._running:
            return
        self._running = False
        try:
            self._pg_ctl("-w", "-t", str(PG_CTL_TIMEOUT_SECONDS), "stop", "-m", "fast")
        finally:
            if self._socket_dir is not None and self._socket_dir != self.data_dir:
                shutil.rmtree(self._socket_dir, ignore_errors=True)
            if not self._keep:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    # --- steps ---------------------------------------------------------------------------------

    def _initdb(self) -> None:
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise EmbeddedPostgresError(
                f"{self.data_dir} is not empty but holds no PostgreSQL cluster (no PG_VERSION); "
                "move it away to have a new database made there"
            )
        staging = self.data_dir.with_name(self.data_dir.name + ".init")
        shutil.rmtree(staging, ignore_errors=True)  # an initialization cut short
        staging.mkdir(mode=0o700, parents=True)
        self._give(staging)
        log.info("initializing embedded postgres", extra={"data_dir": str(self.data_dir)})
        self._run(
            "initdb",
            "-D",
            str(staging),
            "--auth=trust",
            "--auth-local=trust",
            "--encoding=utf8",
            "-U",
            "postgres",
        )
        os.replace(staging, self.data_dir)  # onto nothing, or onto an empty directory

    def _stop_orphan(self) -> int | None:
        """Stop a server left running on this data directory; its pid, or None. A
        ``postmaster.pid`` whose process is another program (a pid reused) is removed."""
        pid_file = self.data_dir / "postmaster.pid"
        try:
            first = pid_file.read_text().split("\n", 1)[0].strip()
        except FileNotFoundError:
            return None
        pid = int(first) if first.isdigit() else None
        if pid is None or not _is_postmaster_of(pid, self.data_dir):
            if pid is not None and _alive(pid):
                log.warning("removing a stale postmaster.pid", extra={"pid": pid})
                pid_file.unlink(missing_ok=True)
            return None  # not running: PostgreSQL sees to a stale file whose process is gone
        log.warning(
            "stopping the embedded postgres left running by a process that did not stop it",
            extra={"pid": pid, "data_dir": str(self.data_dir)},
        )
        self._pg_ctl("-w", "-t", str(PG_CTL_TIMEOUT_SECONDS), "stop", "-m", "fast")
        return pid

    def _choose_socket_dir(self) -> Path:
        if len(str(self.data_dir / _SOCKET_NAME)) <= _MAX_SOCKET_PATH:
            return self.data_dir
        folder = Path(tempfile.mkdtemp(prefix="baton-pg-"))  # a path too long for a socket
        self._give(folder)
        return folder

    def _give(self, path: Path) -> None:
        """Make ``path`` the server's user's (as root)."""
        if self._user is not None:
            import pwd

            entry = pwd.getpwnam(self._user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.data_dir), *args)

    def _run(self, program: str, *args: str) -> None:
        try:
            done = subprocess.run(
                [str(self._bin / program), *args],
                user=self._user,  # PostgreSQL refuses to run as root
                cwd="/",  # the server's user may not be able to enter ours
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=PG_CTL_TIMEOUT_SECONDS + 30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise EmbeddedPostgresError(f"{program} {' '.join(args)}: {e}") from None
        if done.returncode != 0:
            raise EmbeddedPostgresError(
                f"{program} {' '.join(args)} exited {done.returncode}: {done.stdout.strip()}"
                f"{self._log_tail()}"
            )

    def _log_tail(self) -> str:
        try:
            tail = (self.data_dir / "log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""
        return f"\nserver log ({self.data_dir / 'log'}):\n{tail}"


def _bin_dir() -> Path:
    """pgserver's binaries, found without importing pgserver (its import writes to a runtime
    directory it asks platformdirs for)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError(
            "embedded PostgreSQL needs the 'pgserver' package: pip install 'baton[local]', "
            "or set DATABASE_URL"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


class _machine_lock:
    """An exclusive lock for the machine-wide setup, shared by every process on the machine."""

    def __enter__(self) -> None:
        path = Path(tempfile.gettempdir()) / _SETUP_LOCK
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # releases the lock


def _set_up_for_root(user: str, bin_dir: Path, data_dir: Path) -> None:
    """What running the server as ``user`` needs: the user, binaries it may run, a data
    directory it may reach and own. Called under the machine lock."""
    import pwd

    if not _user_exists(user):
        done = subprocess.run(
            ["useradd", "--system", "--shell", "/bin/bash", user],
            capture_output=True,
            text=True,
            check=False,
        )
        # Exists: made meanwhile by a process outside this lock (the pgserver package's own).
        if done.returncode not in (0, _USERADD_EXISTS):
            raise EmbeddedPostgresError(
                f"cannot create the system user {user!r} that PostgreSQL runs as when started "
                f"by root: useradd exited {done.returncode}: {done.stderr.strip()}"
            )
        log.info("created the system user for embedded postgres", extra={"user": user})
    if not (bin_dir / "postgres").stat().st_mode & stat.S_IXOTH:
        _open_to_others(bin_dir.parent)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    for folder in (data_dir.parent, *data_dir.parent.parents):  # every folder on the way
        mode = folder.stat().st_mode
        if mode & (stat.S_IXGRP | stat.S_IXOTH) != stat.S_IXGRP | stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXGRP | stat.S_IXOTH)
    if data_dir.exists():
        entry = pwd.getpwnam(user)
        if data_dir.stat().st_uid != entry.pw_uid:
            os.chown(data_dir, entry.pw_uid, entry.pw_gid)


def _open_to_others(root: Path) -> None:
    """Let every user read ``root``'s tree and run what its owner may run (an install made with
    a umask that keeps others out)."""
    read = stat.S_IRGRP | stat.S_IROTH
    run = stat.S_IXGRP | stat.S_IXOTH
    for folder, _, files in os.walk(root):
        Path(folder).chmod(Path(folder).stat().st_mode | read | run)
        for name in files:
            path = Path(folder, name)
            mode = path.stat().st_mode
            path.chmod(mode | read | (run if mode & stat.S_IXUSR else 0))


def _user_exists(user: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True


def _alive(pid: int) -> bool:
    import psutil

    return bool(psutil.pid_exists(pid))


def _is_postmaster_of(pid: int, data_dir: Path) -> bool:
    """Whether process ``pid`` is a PostgreSQL server on ``data_dir``."""
    import psutil

    try:
        process = psutil.Process(pid)
        args = process.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    if not args or Path(args[0]).name != "postgres" or "-D" not in args[:-1]:
        return False
    return Path(args[args.index("-D") + 1]).resolve() == data_dir
