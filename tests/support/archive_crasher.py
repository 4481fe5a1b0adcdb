"""An archiver that stops dead between writing its documents and deleting the rows: run as
``python -m tests.support.archive_crasher <database url> <s3 endpoint> <bucket> <marker>``, it
archives with a fault hook that creates ``marker`` once every document of its first batch is
stored, then waits to be killed (the crash test sends it SIGKILL)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from baton.store.db import Database

from tests.support.archive import archiving_engine, s3_client


def main(database_url: str, endpoint: str, bucket: str, marker: str) -> None:
    db = Database.pooled(database_url, min_size=1, max_size=4)
    engine = archiving_engine(db, s3_client(endpoint), bucket)

    def crash_here(step: str) -> None:
        if step == "written":
            Path(marker).write_text("written")
            threading.Event().wait()  # until SIGKILL

    engine.archive_fault = crash_here
    engine.archive_expired()


if __name__ == "__main__":
    main(*sys.argv[1:5])
