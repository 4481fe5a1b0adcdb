"""``baton dev``: the whole engine on a laptop, running the same handlers as AWS.

Start order: bind the port (fail fast if taken), hold the data directory (one server at a time),
the API key (``BATON_API_KEY``, written to the data directory's key file; else the key kept
there, generated at the first start), the database (``DATABASE_URL`` or embedded PostgreSQL in
the data directory), migrations, S3 (an endpoint from the environment or moto's server), the
environment the handlers read their settings from, the timers of the scheduled functions, the
HTTP server. SIGINT/SIGTERM stop everything in the reverse order and exit 0: the HTTP server
first (no new requests; those in flight finish, a waiting long-poll ends empty), then the
timers, the functions' connections, and only then the database and S3.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from baton import settings as env_names
from baton.local.datadir import ApiKey, DataDirLock, resolve_api_key
from baton.local.events import REGION
from baton.local.functions import FunctionRegistry, default_functions_dir
from baton.local.logs import configure_logging
from baton.local.options import DevOptions, OptionError
from baton.local.server import LocalApiServer, ServerConfig
from baton.routes import SCHEDULED_FUNCTIONS, api_functions

if TYPE_CHECKING:
    from baton.local.s3 import LocalS3

log = logging.getLogger("baton.local.runtime")

# The outbox mode's relay: its function, and how often baton dev runs it.
RELAY_FUNCTION = "relay"
RELAY_TICK_SECONDS = 0.1
# The system-tasks function (HTTP steps) on a timer of its own: each pass waits up to a second for
# a job (a NOTIFY wakes it at once), so it would hold up the common tick.
SYSTEM_TASKS_FUNCTION = "system_tasks"
SYSTEM_TASKS_TICK_SECONDS = 0.05

# Which SQS queue the relay publishes to, rewritten at every start (the local SQS's port changes):
# the worker SDK's sqs transport reads it (``baton_worker.env``) when BATON_DISPATCH_QUEUE_URL is
# unset and the server is on its machine.
DISPATCH_QUEUE_FILE = "dispatch-queue.json"
_STOP_TIMEOUT_SECONDS = 30.0
_REPEAT_SIGNAL_GRACE_SECONDS = 2.0

__all__ = ["DevOptions", "OptionError", "dispatch_mode", "run"]


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
    hold = DataDirLock(options.data_dir)
    try:
        hold.acquire(port=server.port)
        key = resolve_api_key(options)
    except OptionError as e:
        hold.release()
        server.server_close()
        say(f"error: {e}")
        return 1
    server.config = replace(server.config, api_key=key.value)
    stop = threading.Event()
    restore_signals = _on_stop_signals(stop)
    try:
        with ExitStack() as cleanup:
            cleanup.callback(hold.release)  # the very last: everything else has stopped
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
    try:
        endpoint = s3_endpoint.result()
    except Exception as e:
        say(f"error: local S3 did not start: {e}")
        return False
    if stop.is_set():
        return False
    _export_environment(options, database_url, endpoint, key.value)
    from baton.local.usage import start_metering

    usage = start_metering(os.environ.get(env_names.ENV_USAGE_FILE))
    if usage is not None:
        say(f"counting billable usage into {usage.path}")
        cleanup.callback(_quietly, "writing the usage counters", usage.stop)
    # Registered here, so run after the HTTP server and the timers have stopped, before the
    # database does: the functions close their connections (baton_lambda.runtime's hook).
    from baton import lifecycle

    cleanup.callback(_quietly, "closing the functions' connections", lifecycle.shutdown)

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

    system = Ticker(registry, (SYSTEM_TASKS_FUNCTION,), interval=SYSTEM_TASKS_TICK_SECONDS)
    system.start()
    cleanup.callback(_quietly, "stopping the system tasks", system.stop, _STOP_TIMEOUT_SECONDS)

    thread = threading.Thread(
        target=server.serve_forever, args=(0.1,), name="baton-http", daemon=True
    )
    thread.start()
    cleanup.callback(_quietly, "stopping the HTTP server", _drain, server, say)
    grpc_port = _grpc(
        options, cleanup=cleanup, registry=registry, key=key, stage=server.config.stage, say=say
    )
    if grpc_port is None:
        return False
    _banner(say, options, server, key, grpc_port)
    return True


def _grpc(
    options: DevOptions,
    *,
    cleanup: ExitStack,
    registry: FunctionRegistry,
    key: ApiKey,
    stage: str,
    say: _Console,
) -> int | None:
    """The native gRPC server on ``options.grpc_port``: its port (0 when off), None if it could
    not listen."""
    if options.grpc_port == 0:
        return 0
    from baton.local.grpc_server import GrpcServer

    try:
        grpc_server = GrpcServer(
            registry, api_key=key.value, host=options.host, port=options.grpc_port, stage=stage
        )
    except (OSError, RuntimeError) as e:
        say(
            f"error: cannot serve gRPC on {options.host}:{options.grpc_port}: {e} "
            f"(choose another with {env_names.ENV_GRPC_PORT}, or 0 to turn it off)"
        )
        return None
    grpc_server.start()
    cleanup.callback(_quietly, "stopping the gRPC server", grpc_server.stop, _STOP_TIMEOUT_SECONDS)
    return grpc_server.port


def _drain(server: LocalApiServer, say: _Console) -> None:
    """No new requests; the ones in flight finish (a waiting long-poll ends empty)."""
    say("stopping: no new requests; finishing those in flight")
    left = server.drain(_STOP_TIMEOUT_SECONDS)
    if left:
        log.warning("requests still running after %.0f s; stopping anyway", _STOP_TIMEOUT_SECONDS)


def _database(options: DevOptions, cleanup: ExitStack, say: _Console) -> str:
    if options.database_url:
        say(f"database: {_describe_url(options.database_url)} (from {env_names.ENV_DATABASE_URL})")
        return options.database_url
    from baton.store.embedded import EmbeddedPostgres

    pgdata = options.data_dir / "postgres"
    say(f"starting embedded PostgreSQL in {pgdata}")
    began = time.monotonic()
    pg = EmbeddedPostgres(
        pgdata, keep_data=True, system_user=os.environ.get(env_names.ENV_PG_SYSTEM_USER)
    )
    url = pg.start()
    cleanup.callback(_quietly, "stopping PostgreSQL", pg.stop)
    if pg.orphan is not None:
        say(
            f"PostgreSQL (pid {pg.orphan}) was still running, left by a baton dev that did not "
            "stop cleanly: stopped it and started this one's own (stopped with it)"
        )
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
    s3 = LocalS3(options.payload_bucket, data_dir=options.data_dir / "s3")
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


def _banner(
    say: _Console, options: DevOptions, server: LocalApiServer, key: ApiKey, grpc_port: int
) -> None:
    host = options.host if options.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    url = f"http://{host}:{server.port}"
    rpc = f"Connect at {url}/rpc/" + (f"; gRPC on {host}:{grpc_port}" if grpc_port else "")
    lines = [
        f"serving {len(api_functions())} API functions on {url}",
        f"  RPC        {rpc} (docs/rpc.md)",
        f"  API key    {key.value}  ({key.source})",
        f"  scheduled  {', '.join(_ticking())} every {options.tick_seconds:g} s; "
        f"{SYSTEM_TASKS_FUNCTION} (HTTP steps) continuously",
        *_dispatch_lines(options),
        f"  try        curl -s -H 'x-api-key: {key.value}' {url}/v1/definitions",
        "press Ctrl-C to stop",
    ]
    for line in lines:
        say(line)


def _ticking() -> list[str]:
    """The scheduled functions on the common tick (system tasks have their own timer, and so
    has the relay in the outbox mode)."""
    outbox = dispatch_mode() == "outbox"
    return [
        f
        for f in SCHEDULED_FUNCTIONS
        if f != SYSTEM_TASKS_FUNCTION and not (outbox and f == RELAY_FUNCTION)
    ]


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
