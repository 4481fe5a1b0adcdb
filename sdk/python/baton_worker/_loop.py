"""An asyncio event loop on a thread of its own, for ``async def`` handlers.

The runner's job threads hand coroutines to it and wait for their results, so a slot still maps
to one job thread, while the coroutines themselves share one loop and run concurrently.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


class EventLoopThread:
    """Start once, ``run()`` from any other thread, ``stop()`` once."""

    def __init__(self, name: str = "baton-asyncio") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run ``awaitable`` on the loop and block the calling thread until it is done."""
        coro: Coroutine[Any, Any, T] = (
            awaitable if asyncio.iscoroutine(awaitable) else _await(awaitable)
        )
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self) -> None:
        """Stop the loop (after the runner has drained every job) and close it."""
        if not self._thread.is_alive():
            self._loop.close()
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        try:
            pending = asyncio.all_tasks(self._loop)
            for task in pending:  # tasks a handler spawned and left behind
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.close()
