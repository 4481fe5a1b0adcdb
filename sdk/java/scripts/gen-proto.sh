#!/usr/bin/env bash
# Regenerates src/main/java/dev/baton/workflow/v1/ from proto/workflow/v1/engine.proto (the
# canonical contract) with protoc from Maven Central (com.google.protobuf:protoc), at the version
# of protobuf-java in pom.xml. The generated code is checked in, so a build never needs protoc.
# The proto names no Java package; the Java options are added to a temporary copy here.
#
#   scripts/gen-proto.sh          regenerate the checked-in code
#   scripts/gen-proto.sh --check  regenerate into a temporary directory and fail (one line) when
#                                 the checked-in code differs from what the proto gives
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
check=false
[ "${1:-}" = "--check" ] && check=true
version="$(sed -n 's:.*<protobuf.version>\(.*\)</protobuf.version>.*:\1:p' "$here/pom.xml")"
case "$(uname -m)" in
  x86_64) arch=x86_64 ;;
  aarch64 | arm64) arch=aarch_64 ;;
  *) echo "gen-proto: no protoc build for $(uname -m)" >&2; exit 1 ;;
esac
repo="${MAVEN_REPO:-$HOME/.m2/repository}/com/google/protobuf"
protoc="$repo/protoc/$version/protoc-$version-linux-$arch.exe"
wkt_jar="$repo/protobuf-java/$version/protobuf-java-$version.jar"
# Maven is asked only for what the local repository lacks (a warm check costs no JVM start).
fetch() {
  $check || echo "gen-proto: fetching $1 from Maven Central"
  mvn -B -q -ntp -f "$here/pom.xml" dependency:get -Dtransitive=false -Dartifact="$1" 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' | grep -v '^$' >&2 || true
}
[ -f "$protoc" ] || fetch "com.google.protobuf:protoc:$version:exe:linux-$arch"
[ -f "$wkt_jar" ] || fetch "com.google.protobuf:protobuf-java:$version"
[ -f "$protoc" ] && [ -f "$wkt_jar" ] || { echo "gen-proto: protoc $version could not be fetched" >&2; exit 1; }
[ -x "$protoc" ] || chmod +x "$protoc"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/proto/workflow/v1" "$work/wkt" "$work/out"
sed 's/^package workflow.v1;$/package workflow.v1;\noption java_package = "dev.baton.workflow.v1";\noption java_multiple_files = true;\noption java_outer_classname = "EngineProto";/' \
  "$root/proto/workflow/v1/engine.proto" > "$work/proto/workflow/v1/engine.proto"
grep -q 'java_package' "$work/proto/workflow/v1/engine.proto" || {
  echo "gen-proto: the proto's package line moved; update this script" >&2; exit 1; }
# The well-known types (struct.proto, timestamp.proto) ship inside the protobuf-java jar.
unzip -q -o "$wkt_jar" 'google/protobuf/*.proto' -d "$work/wkt"
"$protoc" -I "$work/proto" -I "$work/wkt" --java_out="$work/out" "$work/proto/workflow/v1/engine.proto"

target="$here/src/main/java/dev/baton/workflow"
if $check; then
  if ! diff -rq "$work/out/dev/baton/workflow" "$target" >/dev/null 2>&1; then
    echo "java: the generated proto code in sdk/java/src/main/java/dev/baton/workflow is stale; run: make -C sdk/java proto" >&2
    exit 1
  fi
  echo "java: generated proto code matches proto/workflow/v1/engine.proto"
  exit 0
fi
rm -rf "$target"
cp -r "$work/out/dev/baton/workflow" "$target"
echo "gen-proto: wrote $(find "$target" -name '*.java' | wc -l) files"
