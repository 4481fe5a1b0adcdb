#!/usr/bin/env bash
# Regenerates package workflowv1 from the canonical contract, proto/workflow/v1/engine.proto,
# with protoc-gen-go at the version pinned in go.mod (a `tool` of this module). Needs protoc
# on PATH (Debian: apt-get install protobuf-compiler).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
command -v protoc >/dev/null 2>&1 || { echo "generate needs protoc (apt-get install protobuf-compiler)" >&2; exit 1; }
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
(cd "$here" && go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go)
PATH="$bin:$PATH" protoc \
  --proto_path="$root/proto" \
  --go_out="$here/workflowv1" --go_opt=paths=source_relative \
  --go_opt=Mworkflow/v1/engine.proto=github.com/baton-dev/baton/sdk/go/workflowv1 \
  workflow/v1/engine.proto
mv "$here/workflowv1/workflow/v1/engine.pb.go" "$here/workflowv1/engine.pb.go"
rm -rf "$here/workflowv1/workflow"
echo "generated sdk/go/workflowv1/engine.pb.go"
