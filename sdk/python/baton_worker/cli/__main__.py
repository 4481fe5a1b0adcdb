"""``python -m baton_worker.cli``: the ``baton`` command."""

from __future__ import annotations

import sys

from baton_worker.cli import main

sys.exit(main())
