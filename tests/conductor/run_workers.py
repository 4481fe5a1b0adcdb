"""Runs conductor-python's TaskHandler on :mod:`tests.conductor.workers`, configured only from
the environment (CONDUCTOR_SERVER_URL, CONDUCTOR_AUTH_KEY, CONDUCTOR_AUTH_SECRET), until killed."""

import signal
import sys
import time

from conductor.client.automator.task_handler import TaskHandler
from conductor.client.configuration.configuration import Configuration


def main() -> int:
    import tests.conductor.workers  # noqa: F401  (registers the decorated workers)

    handler = TaskHandler(configuration=Configuration(), scan_for_annotated_workers=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    handler.start_processes()
    print("workers started", flush=True)
    try:
        while not stop:
            time.sleep(0.2)
    finally:
        handler.stop_processes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
