"""Support code shared by Baton's benchmarks, one module per concern: ``postgres`` (a server and
fresh databases on it), ``processes`` (spawned workers that never outlive the run), ``cpu`` (who
used the machine's CPU during a timed phase), ``wire`` (round trips counted at the driver) and
``reporting`` (progress lines and aligned tables). Benchmarks run as scripts
(``python bench/<name>.py``), so this package sits on ``sys.path`` next to them; importing it also
puts ``shared/`` there, so the core library imports as ``baton`` without an install, in the parent
and in spawned children alike (a spawned child starts with its parent's ``sys.path``).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "shared") not in sys.path:
    sys.path.insert(0, str(ROOT / "shared"))


class BenchError(RuntimeError):
    """The benchmark could not produce a trustworthy number (lost work, a dead worker...)."""
