"""Compile ``workflow/v1/engine.proto`` into the descriptor set the engine and the Python worker
SDK load their message types from (``make proto``; needs grpcio-tools, a dev dependency).

Usage: ``python proto/compile.py [--check]``; ``--check`` writes nothing and fails when a
checked-in copy differs from what the proto compiles to.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto" / "workflow" / "v1" / "engine.proto"
TARGETS = (
    ROOT / "shared" / "baton" / "rpc" / "engine.binpb",
    ROOT / "sdk" / "python" / "baton_worker" / "engine.binpb",
)


def compile_descriptor_set() -> bytes:
    """The FileDescriptorSet of engine.proto alone (its imports are well-known types)."""
    from grpc_tools import protoc

    include = Path(protoc.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "engine.binpb"
        args = ["protoc", f"-I{ROOT / 'proto'}", f"-I{include}", f"--descriptor_set_out={out}"]
        if protoc.main([*args, str(PROTO)]) != 0:
            raise RuntimeError(f"protoc could not compile {PROTO}")
        return out.read_bytes()


def main(argv: list[str]) -> int:
    compiled = compile_descriptor_set()
    stale = [t for t in TARGETS if not t.exists() or t.read_bytes() != compiled]
    if "--check" in argv:
        for t in stale:
            print(f"{t.relative_to(ROOT)} is stale: run make proto", file=sys.stderr)
        return 1 if stale else 0
    for t in stale:
        t.write_bytes(compiled)
        print(f"wrote {t.relative_to(ROOT)} ({len(compiled)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
