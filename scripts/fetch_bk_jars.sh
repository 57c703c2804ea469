#!/usr/bin/env bash
# Fetch the BookKeeper runtime jars (bookie, shell, client, AutoRecoveryMain, HTTP admin, Prometheus
# provider) from Maven Central into $BK_HOME/lib, a cache outside git. Idempotent: a complete cache
# for the same version is reused.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
BK_VERSION=${BK_VERSION:-4.17.3}
BK_HOME=${BK_HOME:-$HOME/.cache/bk-$BK_VERSION}
lib="$BK_HOME/lib"
if [ -f "$lib/.complete" ] && [ "$(cat "$lib/.complete")" = "$BK_VERSION" ]; then
  echo "BookKeeper $BK_VERSION jars: cached in $lib"
  exit 0
fi
command -v mvn >/dev/null || { echo "mvn not found: Maven is needed to fetch the BookKeeper jars" >&2; exit 1; }
rm -rf "$lib.tmp"; mkdir -p "$lib.tmp"
echo "Fetching BookKeeper $BK_VERSION jars into $lib ..."
cd "$here/devcluster/bk-jars"
offline=()
if ! timeout 600 mvn -B -q -o -Dbk.version="$BK_VERSION" \
     org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
     -DincludeScope=runtime -DoutputDirectory="$lib.tmp" >/dev/null 2>&1; then
  if ! timeout 900 mvn -B -q -Dbk.version="$BK_VERSION" \
       org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
       -DincludeScope=runtime -DoutputDirectory="$lib.tmp"; then
    echo "FAILED to fetch org.apache.bookkeeper:bookkeeper-server:$BK_VERSION and friends from Maven Central" >&2
    exit 1
  fi
fi
n=$(ls "$lib.tmp"/*.jar | wc -l)
[ "$n" -ge 50 ] || { echo "only $n jars fetched into $lib.tmp: incomplete" >&2; exit 1; }
rm -rf "$lib"; mv "$lib.tmp" "$lib"
echo "$BK_VERSION" > "$lib/.complete"
echo "BookKeeper $BK_VERSION: $n jars in $lib"
