#!/usr/bin/env bash
# Everything a fresh machine needs for the demo and the test suite. Idempotent; safe to re-run.
#   - Debian packages: zookeeper (the real ZooKeeper), a JDK 17 and Maven if missing
#   - BookKeeper 4.17.x jars from Maven Central into ~/.cache (outside git)
#   - Pulsar's managed-ledger library (4.0.x) and its dependencies likewise, for the test harness's MlTool
#   - a virtualenv in .venv with the pinned dependencies of requirements/dev.lock (runtime + the spark and
#     test extras, hash-checked; scripts/lock.sh refreshes it), bk-auditor installed (editable) and its
#     protobuf code generated
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
echo "== Pulsar managed-ledger jars (the test harness's MlTool)"
"$here/scripts/fetch_ml_jars.sh"

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.installed
lock=requirements/dev.lock
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
  echo "== installing the pinned dependencies ($lock) and bk-auditor into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # Exactly the locked versions, each checked against its hash; then our package alone. A dependency
  # pyproject.toml names but the lock lacks makes `pip check` fail: run scripts/lock.sh.
  .venv/bin/python -m pip install -q --require-hashes -r "$lock"
  .venv/bin/python -m pip install -q --no-deps -e '.[test,spark]'
  .venv/bin/python -m pip check >/dev/null || { .venv/bin/python -m pip check; echo "$lock is out of date: run scripts/lock.sh" >&2; exit 2; }
  touch "$stamp"
fi
echo "== generating protobuf code"
.venv/bin/python scripts/gen_protos.py
echo "== set-up done"
