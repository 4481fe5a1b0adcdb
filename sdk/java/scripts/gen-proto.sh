#!/usr/bin/env bash
# Regenerates src/main/java/dev/baton/workflow/v1/ from proto/workflow/v1/engine.proto (the
# canonical contract) with protoc from Maven Central (com.google.protobuf:protoc), at the version
# of protobuf-java in pom.xml. The generated code is checked in, so a build never needs protoc.
# The proto names no Java package; the Java options are added to a temporary copy here.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
version="$(sed -n 's:.*<protobuf.version>\(.*\)</protobuf.version>.*:\1:p' "$here/pom.xml")"
case "$(uname -m)" in
  x86_64) arch=x86_64 ;;
  aarch64 | arm64) arch=aarch_64 ;;
  *) echo "gen-proto: no protoc build for $(uname -m)" >&2; exit 1 ;;
esac
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "gen-proto: protoc $version (linux-$arch) from Maven Central"
mvn -B -q -ntp -f "$here/pom.xml" dependency:copy \
  -Dartifact="com.google.protobuf:protoc:$version:exe:linux-$arch" -DoutputDirectory="$work" \
  -Dmdep.stripVersion=true
protoc="$work/protoc-linux-$arch.exe"
chmod +x "$protoc"
mkdir -p "$work/proto/workflow/v1"
sed 's/^package workflow.v1;$/package workflow.v1;\noption java_package = "dev.baton.workflow.v1";\noption java_multiple_files = true;\noption java_outer_classname = "EngineProto";/' \
  "$root/proto/workflow/v1/engine.proto" > "$work/proto/workflow/v1/engine.proto"
grep -q 'java_package' "$work/proto/workflow/v1/engine.proto" || {
  echo "gen-proto: the proto's package line moved; update this script" >&2; exit 1; }
# The well-known types (struct.proto, timestamp.proto) ship inside the protobuf-java jar.
mvn -B -q -ntp -f "$here/pom.xml" dependency:unpack \
  -Dartifact="com.google.protobuf:protobuf-java:$version:jar" -DoutputDirectory="$work/wkt" \
  -Dmdep.unpack.includes='google/protobuf/*.proto'
rm -rf "$here/src/main/java/dev/baton/workflow"
"$protoc" -I "$work/proto" -I "$work/wkt" --java_out="$here/src/main/java" "$work/proto/workflow/v1/engine.proto"
echo "gen-proto: wrote $(find "$here/src/main/java/dev/baton/workflow" -name '*.java' | wc -l) files"
