#!/usr/bin/env bash
# Fetch Pulsar's managed-ledger library and its runtime dependencies (pulsar-metadata, its own
# bookkeeper-server 4.17.2 client and ZooKeeper 3.9.3 client) from Maven Central into
# $PULSAR_ML_HOME/lib, a cache outside git, for the test harness's MlTool
# (devcluster/java/MlTool.java). Idempotent: a complete cache for the same version is reused.
#
# Pinned to 4.0.7, not 4.0.8: managed-ledger 4.0.8's dependencies pulsar-opentelemetry:4.0.8 and
# jetcd-core-shaded:4.0.8 are not on Maven Central (404), while 4.0.7 resolves completely.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
PULSAR_ML_VERSION=${PULSAR_ML_VERSION:-4.0.7}
PULSAR_ML_HOME=${PULSAR_ML_HOME:-$HOME/.cache/pulsar-ml-$PULSAR_ML_VERSION}
lib="$PULSAR_ML_HOME/lib"
if [ -f "$lib/.complete" ] && [ "$(cat "$lib/.complete")" = "$PULSAR_ML_VERSION" ]; then
  echo "Pulsar managed-ledger $PULSAR_ML_VERSION jars: cached in $lib"
  exit 0
fi
fail() {
  rm -rf "$lib.tmp"
  echo "FAILED to fetch org.apache.pulsar:managed-ledger:$PULSAR_ML_VERSION jars into $lib: $*" >&2
  exit 1
}
command -v mvn >/dev/null || fail "mvn not found (Maven is needed; make setup installs it)"
mkdir -p "$PULSAR_ML_HOME"
rm -rf "$lib.tmp"; mkdir -p "$lib.tmp"
log="$PULSAR_ML_HOME/fetch.log"
echo "Fetching Pulsar managed-ledger $PULSAR_ML_VERSION jars into $lib ..."
cd "$here/devcluster/ml-jars"
# settings.xml mirrors every repository to Maven Central (Pulsar's poms name unreachable ones).
mvn_args=(-B -s settings.xml -Dpulsar.version="$PULSAR_ML_VERSION"
  org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies
  -DincludeScope=runtime -DoutputDirectory="$lib.tmp")
# Offline first (a warm ~/.m2); then online, -U so that a failure cached by an earlier try is retried.
if ! timeout 600 mvn -o "${mvn_args[@]}" >"$log" 2>&1; then
  if ! timeout 1200 mvn -U "${mvn_args[@]}" >"$log" 2>&1; then
    # Maven's first error says what could not be resolved; the rest is in the log.
    fail "$(grep -m1 -E '^\[ERROR\] [^ ]' "$log" | cut -c1-400 || true) (Maven's output: $log)"
  fi
fi
[ -f "$lib.tmp/managed-ledger-$PULSAR_ML_VERSION.jar" ] || fail "managed-ledger-$PULSAR_ML_VERSION.jar missing (see $log)"
n=$(find "$lib.tmp" -maxdepth 1 -name "*.jar" | wc -l)
[ "$n" -ge 100 ] || fail "only $n jars fetched: incomplete (see $log)"
rm -rf "$lib"; mv "$lib.tmp" "$lib"
echo "$PULSAR_ML_VERSION" > "$lib/.complete"
echo "Pulsar managed-ledger $PULSAR_ML_VERSION: $n jars in $lib"
