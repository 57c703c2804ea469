#!/usr/bin/env bash
# Everything a fresh machine needs for the demo and the test suite. Idempotent; safe to re-run.
#   - Debian packages: zookeeper (the real ZooKeeper), a JDK 17 and Maven if missing
#   - BookKeeper 4.17.x jars from Maven Central into ~/.cache (outside git)
#   - Pulsar's managed-ledger library (4.0.x) and its dependencies likewise, for the test harness's MlTool
#   - the Python virtualenv (scripts/venv.sh, alone what `make lint` needs): .venv with the pinned
#     dependencies of requirements/dev.lock, bk-auditor installed (editable) and its protobuf code generated
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

need_pkgs=()
[ -f /usr/share/java/zookeeper.jar ] || need_pkgs+=(zookeeper)
command -v javac >/dev/null || need_pkgs+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need_pkgs+=(maven)
command -v promtool >/dev/null || need_pkgs+=(prometheus)  # promtool: alert rule checks and tests
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "== installing Debian packages: ${need_pkgs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

echo "== BookKeeper jars"
"$here/scripts/fetch_bk_jars.sh"
# A 4.16 bookie is part of make test (tests/realcluster/bookie/test_batch_read.py: a bookie without
# batched reads); its server jars only, the shell and client stay on 4.17.3.
BK_VERSION=4.16.6 "$here/scripts/fetch_bk_jars.sh"
echo "== Pulsar managed-ledger jars (the test harness's MlTool)"
"$here/scripts/fetch_ml_jars.sh"

"$here/scripts/venv.sh"
echo "== set-up done"
