"""The CDK app. ``cdk synth|deploy`` (via cdk.json) and ``make synth`` run this file."""

from __future__ import annotations

import os
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
# The route table and settings names (package ``baton``) live in shared/; the constructs here.
for _path in (_ROOT / "shared", _ROOT / "infra"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
# jsii prints an end-of-life banner on every run under Node 20 (what CI has); it is noise here.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from baton_infra.application import create_app  # noqa: E402
from baton_infra.config import ConfigError, LayerNotBuiltError  # noqa: E402


def main() -> int:
    # Under the CDK CLI, CDK_OUTDIR names the output; run directly, write where the CLI would.
    outdir = None if "CDK_OUTDIR" in os.environ else str(_ROOT / "cdk.out")
    try:
        app, stack = create_app(outdir=outdir)
    except (LayerNotBuiltError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    assembly = app.synth()
    if outdir is not None:
        print(f"synthesized {stack.stack_name} into {assembly.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
