#!/usr/bin/env bash
# Everything a fresh machine needs for the demo and the test suite. Idempotent; safe to re-run.
#   - Debian packages: zookeeper (the real ZooKeeper), a JDK 17 and Maven if missing
#   - BookKeeper 4.17.x jars from Maven Central into ~/.cache (outside git)
#   - a virtualenv in .venv with bk-auditor installed (editable) and its protobuf code generated
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

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ]; then
  echo "== installing bk-auditor and its dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
fi
echo "== generating protobuf code"
.venv/bin/python scripts/gen_protos.py
echo "== set-up done"
