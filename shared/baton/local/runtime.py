"""``baton dev``: the whole engine on a laptop, running the same handlers as AWS.

Start order: bind the port (fail fast if taken), the API key (``BATON_API_KEY``, else the one kept
in the data directory, generated at the first start), the database (``DATABASE_URL`` or embedded
PostgreSQL in the data directory), migrations, S3 (an endpoint from the environment or moto's
server), the environment the handlers read their settings from, the HTTP server, the timer for
the scheduled functions. SIGINT/SIGTERM stop everything in the reverse order and exit 0.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from baton import settings as env_names
from baton.local.events import REGION
from baton.local.functions import DEFAULT_MAX_CONTAINERS, FunctionRegistry, default_functions_dir
from baton.local.logs import configure_logging
from baton.local.server import LocalApiServer, ServerConfig
from baton.routes import SCHEDULED_FUNCTIONS, api_functions

if TYPE_CHECKING:
    from baton.local.s3 import LocalS3

log = logging.getLogger("baton.local.runtime")

# The outbox mode's relay: its function, and how often baton dev runs it.
RELAY_FUNCTION = "relay"
RELAY_TICK_SECONDS = 0.1

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_DATA_DIR = Path(".baton/data")
DEFAULT_TICK_SECONDS = 1.0
DEFAULT_PAYLOAD_BUCKET = "baton-payloads"
MAX_CONCURRENCY = 1000  # Lambda's default concurrency for a whole account
# The generated API key, kept in the data directory (0600) so it survives restarts; the worker
# SDK and the CLI read the same file (``baton_worker.env``) when BATON_API_KEY is unset.
API_KEY_FILE = "api-key"
# Which SQS queue the relay publishes to, rewritten at every start (the local SQS's port changes):
# the worker SDK's sqs transport reads it (``baton_worker.env``) when BATON_DISPATCH_QUEUE_URL is
# unset and the server is on its machine.
DISPATCH_QUEUE_FILE = "dispatch-queue.json"
_USABLE_KEY = re.compile(r"[!-~]{8,256}")  # visible ASCII: it travels in an HTTP header
_STOP_TIMEOUT_SECONDS = 30.0
_REPEAT_SIGNAL_GRACE_SECONDS = 2.0


class OptionError(ValueError):
    """A command-line option or environment variable has an unusable value."""


@dataclass(frozen=True, slots=True)
class DevOptions:
    """How ``baton dev`` runs. ``None`` means: the runtime provides it (see each field)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
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


class _Console:
    """Human progress lines on stdout (the JSON logs go there too, in order)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, line: str) -> None:
        print(f"baton: {line}", file=self.out, flush=True)


def run(options: DevOptions, *, out: TextIO | None = None) -> int:
    """Serve until SIGINT/SIGTERM; return the process exit code."""
    configure_logging()
    say = _Console(out or sys.stdout)
    functions_dir = (options.functions_dir or default_functions_dir()).resolve()
    if not functions_dir.is_dir():
        say(f"error: no functions directory at {functions_dir} (use --functions-dir)")
        return 2
    registry = FunctionRegistry(functions_dir, max_containers=options.concurrency)
    # The key is settled once the port is ours, so a start that fails to bind leaves no trace.
    placeholder = ServerConfig(api_key=secrets.token_urlsafe(24))
    try:
        server = LocalApiServer((options.host, options.port), config=placeholder, registry=registry)
    except OSError as e:
        say(f"error: cannot listen on {options.host}:{options.port}: {e.strerror or e}")
        return 1
    try:
        key = resolve_api_key(options)
    except OptionError as e:
        server.server_close()
        say(f"error: {e}")
        return 1
    server.config = replace(server.config, api_key=key.value)
    stop = threading.Event()
    restore_signals = _on_stop_signals(stop)
    try:
        with ExitStack() as cleanup:
            cleanup.callback(_quietly, "closing the listening socket", server.server_close)
            started = _start(
                options,
                cleanup=cleanup,
                say=say,
                stop=stop,
                server=server,
                registry=registry,
                key=key,
            )
            if started:
                while not stop.wait(1.0):
                    pass
                say("stopping")
        say("stopped")
        return 0 if started or stop.is_set() else 1  # a Ctrl-C during startup is a clean stop
    finally:
        restore_signals()


def _start(
    options: DevOptions,
    *,
    cleanup: ExitStack,
    say: _Console,
    stop: threading.Event,
    server: LocalApiServer,
    registry: FunctionRegistry,
    key: ApiKey,
) -> bool:
    """Start everything after the socket, registering each stop in ``cleanup``; False when
    startup failed or was interrupted."""
    from baton.errors import BatonError

    say(f"functions from {registry.functions_dir}")
    s3_endpoint = _s3(options, cleanup, say)  # starts in the background while PostgreSQL does
    try:
        database_url = _database(options, cleanup, say)
        if stop.is_set():
            return False
        _migrate(database_url, say)
    except BatonError as e:
        say(f"error: {e}")
        return False
    endpoint = s3_endpoint.result()
    if stop.is_set():
        return False
    _export_environment(options, database_url, endpoint, key.value)

    thread = threading.Thread(
        target=server.serve_forever, args=(0.1,), name="baton-http", daemon=True
    )
    thread.start()
    cleanup.callback(_quietly, "stopping the HTTP server", server.shutdown)

    from baton.local.scheduler import Ticker

    # In the outbox mode the relay gets a timer of its own, as fast as the deployed relay's
    # drains (every 100 ms): behind the others' tick, dispatch would wait up to a whole tick.
    outbox = dispatch_mode() == "outbox"
    ticker = Ticker(registry, _ticking(), interval=options.tick_seconds)
    ticker.start()
    cleanup.callback(_quietly, "stopping the timer", ticker.stop, _STOP_TIMEOUT_SECONDS)
    if outbox:
        relay = Ticker(
            registry, (RELAY_FUNCTION,), interval=min(options.tick_seconds, RELAY_TICK_SECONDS)
        )
        relay.start()
        cleanup.callback(_quietly, "stopping the relay's timer", relay.stop, _STOP_TIMEOUT_SECONDS)
    _banner(say, options, server, key)
    return True


@dataclass(frozen=True, slots=True)
class ApiKey:
    """The key the local server accepts, and where it came from (for the banner)."""

    value: str
    source: str


def api_key_path(data_dir: Path) -> Path:
    return data_dir / API_KEY_FILE


def resolve_api_key(options: DevOptions) -> ApiKey:
    """``BATON_API_KEY`` when set; else the key kept in the data directory, generated (and
    written with 0600 permissions) at the first start."""
    if options.api_key:
        return ApiKey(options.api_key, f"from {env_names.ENV_API_KEY}")
    path = api_key_path(options.data_dir)
    try:
        kept = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        kept = ""
    except (OSError, UnicodeDecodeError) as e:
        raise OptionError(f"cannot read the API key in {path}: {e}") from None
    if kept:
        if not _USABLE_KEY.fullmatch(kept):
            raise OptionError(
                f"the API key in {path} is not 8-256 visible ASCII characters; "
                "fix it, or delete the file to have a new one generated"
            )
        try:
            if path.stat().st_mode & 0o077:
                path.chmod(0o600)  # a credential: readable by its owner only
        except OSError:
            log.warning("cannot restrict the permissions of %s", path)
        return ApiKey(kept, f"kept in {path}; set {env_names.ENV_API_KEY} to choose one")
    value = secrets.token_urlsafe(24)
    _write_private(path, value + "\n")
    return ApiKey(value, f"generated, kept in {path}; set {env_names.ENV_API_KEY} to choose one")


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


def _database(options: DevOptions, cleanup: ExitStack, say: _Console) -> str:
    if options.database_url:
        say(f"database: {_describe_url(options.database_url)} (from {env_names.ENV_DATABASE_URL})")
        return options.database_url
    from baton.store.embedded import EmbeddedPostgres

    pgdata = options.data_dir / "postgres"
    say(f"starting embedded PostgreSQL in {pgdata}")
    began = time.monotonic()
    pg = EmbeddedPostgres(pgdata, keep_data=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs' note about XDG_RUNTIME_DIR
        url = pg.start()
    cleanup.callback(_quietly, "stopping PostgreSQL", pg.stop)
    say(f"PostgreSQL ready in {time.monotonic() - began:.1f} s")
    return url


def _migrate(database_url: str, say: _Console) -> None:
    from baton.store import migrations

    applied = migrations.apply(database_url)
    if applied:
        say(f"migrations applied: {', '.join(applied)}")
    else:
        say(f"schema up to date ({len(migrations.available())} migrations)")


def _s3(options: DevOptions, cleanup: ExitStack, say: _Console) -> Future[str]:
    """The S3 endpoint, as a future: moto's server takes about a second to import and start."""
    if options.s3_endpoint:
        say(f"payloads: S3 at {options.s3_endpoint}, bucket {options.payload_bucket}")
        ready: Future[str] = Future()
        ready.set_result(options.s3_endpoint)
        return ready
    from baton.local.s3 import LocalS3

    say("starting local S3")
    s3 = LocalS3(options.payload_bucket, snapshot_dir=options.data_dir / "s3")
    starting: Future[str] = Future()

    def start() -> None:
        try:
            endpoint = s3.start()
        except BaseException as e:  # handed to whoever waits on the future
            starting.set_exception(e)
            return
        say(f"local S3 ready at {endpoint}, bucket {options.payload_bucket}")
        starting.set_result(endpoint)

    threading.Thread(target=start, name="baton-s3-start", daemon=True).start()
    cleanup.callback(_quietly, "stopping local S3", _stop_when_started, s3, starting)
    return starting


def _stop_when_started(s3: LocalS3, starting: Future[str]) -> None:
    if starting.exception() is None:
        s3.stop()


def _export_environment(
    options: DevOptions, database_url: str, s3_endpoint: str, api_key: str
) -> None:
    """What a Lambda's configuration would hold; handlers build their settings from it."""
    os.environ[env_names.ENV_DATABASE_URL] = database_url
    os.environ[env_names.ENV_STAGE] = "local"
    os.environ[env_names.ENV_API_KEY] = api_key
    os.environ[env_names.ENV_S3_ENDPOINT] = s3_endpoint
    os.environ[env_names.ENV_PAYLOAD_BUCKET] = options.payload_bucket
    os.environ.setdefault(env_names.ENV_AWS_DEFAULT_REGION, REGION)
    # Powertools refuses to flush metrics without a namespace (the handler would raise).
    os.environ.setdefault(env_names.ENV_POWERTOOLS_METRICS_NAMESPACE, env_names.METRICS_NAMESPACE)
    os.environ.setdefault(env_names.ENV_POWERTOOLS_METRICS_DISABLED, "true")
    if not options.s3_endpoint:
        # boto3 refuses to presign without credentials; moto ignores them.
        from baton.local.s3 import LOCAL_ACCESS_KEY, LOCAL_SECRET_KEY

        os.environ.setdefault(env_names.ENV_AWS_ACCESS_KEY_ID, LOCAL_ACCESS_KEY)
        os.environ.setdefault(env_names.ENV_AWS_SECRET_ACCESS_KEY, LOCAL_SECRET_KEY)
    if not os.environ.get(env_names.ENV_DISPATCH_QUEUE_URL) and not options.s3_endpoint:
        # The event-driven mode's FIFO queue, on the same moto server (made in either mode, so
        # the relay can drain rows left from before a switch back to polling).
        from baton.local.s3 import local_dispatch_queue

        os.environ[env_names.ENV_SQS_ENDPOINT] = s3_endpoint
        os.environ[env_names.ENV_DISPATCH_QUEUE_URL] = local_dispatch_queue(
            s3_endpoint, database_url
        )
    _write_dispatch_queue(options.data_dir)


def dispatch_mode() -> str:
    """The mode the engine dispatches new jobs in (``BATON_DISPATCH_MODE``; checked at start)."""
    return (os.environ.get(env_names.ENV_DISPATCH_MODE) or "polling").strip().lower()


def _write_dispatch_queue(data_dir: Path) -> None:
    """Say in the data directory which queue the relay publishes to (none: remove what an
    earlier start wrote), for workers on the sqs transport to find."""
    path = data_dir / DISPATCH_QUEUE_FILE
    queue_url = os.environ.get(env_names.ENV_DISPATCH_QUEUE_URL)
    try:
        if not queue_url:
            path.unlink(missing_ok=True)
            return
        kept = {
            "queueUrl": queue_url,
            "endpoint": os.environ.get(env_names.ENV_SQS_ENDPOINT) or None,
            "region": os.environ.get(env_names.ENV_AWS_DEFAULT_REGION) or REGION,
            "mode": dispatch_mode(),
        }
        staging = path.with_name(f".{path.name}.{os.getpid()}")
        staging.write_text(json.dumps(kept, indent=2) + "\n", encoding="utf-8")
        os.replace(staging, path)
    except OSError as e:  # workers can still be told the queue by BATON_DISPATCH_QUEUE_URL
        log.warning("cannot write %s: %s", path, e.strerror or e)


def _describe_url(url: str) -> str:
    """A connection string without its password."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:  # connecting will report it properly
        return "an external database"
    return " ".join(f"{k}={parts[k]}" for k in ("host", "port", "dbname", "user") if parts.get(k))


def _banner(say: _Console, options: DevOptions, server: LocalApiServer, key: ApiKey) -> None:
    host = options.host if options.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    url = f"http://{host}:{server.port}"
    lines = [
        f"serving {len(api_functions())} API functions on {url}",
        f"  API key    {key.value}  ({key.source})",
        f"  scheduled  {', '.join(_ticking())} every {options.tick_seconds:g} s",
        *_dispatch_lines(options),
        f"  try        curl -s -H 'x-api-key: {key.value}' {url}/v1/definitions",
        "press Ctrl-C to stop",
    ]
    for line in lines:
        say(line)


def _ticking() -> list[str]:
    """The scheduled functions on the common tick (in the outbox mode the relay has its own)."""
    outbox = dispatch_mode() == "outbox"
    return [f for f in SCHEDULED_FUNCTIONS if not (outbox and f == RELAY_FUNCTION)]


def _dispatch_lines(options: DevOptions) -> list[str]:
    if dispatch_mode() != "outbox":
        return [
            "  dispatch   polling (workers poll POST /v1/jobs/poll; "
            f"{env_names.ENV_DISPATCH_MODE}=outbox pushes jobs through SQS FIFO)"
        ]
    queue = os.environ.get(env_names.ENV_DISPATCH_QUEUE_URL, "?")
    every = min(options.tick_seconds, RELAY_TICK_SECONDS)
    return [
        f"  dispatch   outbox: relay every {every:g} s -> SQS FIFO {queue}",
        "  workers    baton worker run --transport sqs MODULE:registry  (the queue is in "
        f"{options.data_dir / DISPATCH_QUEUE_FILE})",
    ]


def _on_stop_signals(stop: threading.Event) -> Callable[[], None]:
    """SIGINT/SIGTERM set ``stop``; another one a little later interrupts a stop that hangs.

    Repeats within the grace period are ignored: one Ctrl-C can arrive twice, once through the
    terminal's process group and once forwarded by a wrapper such as ``timeout``.
    """
    first_at: list[float] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if not first_at:
            first_at.append(time.monotonic())
            stop.set()
        elif time.monotonic() - first_at[0] > _REPEAT_SIGNAL_GRACE_SECONDS:
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def _quietly(what: str, stop: Callable[..., Any], *args: Any) -> None:
    """Run one step of the shutdown; a failure is logged and the next steps still run."""
    try:
        stop(*args)
    except Exception:
        log.exception("failed while %s", what)
