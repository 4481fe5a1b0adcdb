#!/usr/bin/env bash
# Regenerates package workflowv1 from the canonical contract, proto/workflow/v1/engine.proto,
# with protoc-gen-go at the version pinned in go.mod (a `tool` of this module). Needs protoc
# on PATH (Debian: apt-get install protobuf-compiler) or the repository's .venv (whose
# grpcio-tools bundles one): the code is the same, only the header's version line differs.
#
#   scripts/generate.sh            rewrite workflowv1/engine.pb.go
#   scripts/generate.sh --check    regenerate into a temporary directory and fail, with one
#                                  line, when the checked-in code differs (make check runs it)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
check=false
[ "${1:-}" = "--check" ] && check=true
# protoc: the one on PATH, else the repository's .venv (grpcio-tools bundles one; make install).
if command -v protoc >/dev/null 2>&1; then
  protoc=(protoc)
elif [ -x "$root/.venv/bin/python" ] && "$root/.venv/bin/python" -c "import grpc_tools.protoc" 2>/dev/null; then
  include="$("$root/.venv/bin/python" -c "import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), '_proto'))")"
  protoc=("$root/.venv/bin/python" -m grpc_tools.protoc "-I$include")
else
  echo "sdk/go: generating workflowv1 needs protoc (apt-get install protobuf-compiler, or make install at the repository's root)" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$here" && go build -o "$tmp/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go)
mkdir -p "$tmp/out"
"${protoc[@]}" \
  --plugin=protoc-gen-go="$tmp/protoc-gen-go" \
  --proto_path="$root/proto" \
  --go_out="$tmp/out" --go_opt=paths=source_relative \
  --go_opt=Mworkflow/v1/engine.proto=github.com/baton-dev/baton/sdk/go/workflowv1 \
  workflow/v1/engine.proto
generated="$tmp/out/workflow/v1/engine.pb.go"
if $check; then
  # The header's protoc version line is not the contract: another protoc release writes
  # the same code under a different version.
  strip() { grep -v '^// 	protoc  ' "$1"; }
  if ! diff -q <(strip "$generated") <(strip "$here/workflowv1/engine.pb.go") >/dev/null; then
    echo "sdk/go: workflowv1/engine.pb.go is stale against proto/workflow/v1/engine.proto; regenerate it with: make -C sdk/go generate" >&2
    exit 1
  fi
  exit 0
fi
mv "$generated" "$here/workflowv1/engine.pb.go"
echo "generated sdk/go/workflowv1/engine.pb.go"
