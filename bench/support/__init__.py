"""Support code shared by Baton's benchmarks, one module per concern: ``postgres`` (a server and
fresh databases on it), ``processes`` (spawned workers and the local API server, none outliving
the run), ``fleet`` (workers that run timed stages in step), ``cpu`` (who used the machine's CPU
while a phase was timed), ``wire`` (round trips counted at the driver), ``workload`` (the
one-step workflows measured, their drain loop and the check that no work was lost),
``library`` (the only module importing the core library) and ``reporting`` (progress lines and
tables). Benchmarks run as scripts (``python bench/<name>.py``), so this package is importable
from the directory next to them; importing it also puts ``shared/`` on ``sys.path``, so the core
library imports as ``baton`` without an install, in the parent and in spawned children alike (a
spawned child starts with its parent's ``sys.path``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))


class BenchError(RuntimeError):
    """The benchmark could not produce a trustworthy number (lost work, a dead worker...)."""
