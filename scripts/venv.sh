#!/usr/bin/env bash
# The Python side of the set-up alone (what `make lint` needs; scripts/setup.sh runs it too, after the
# Debian packages and the Java jars). Idempotent; safe to re-run.
#   - a virtualenv in .venv with the pinned dependencies of requirements/dev.lock (runtime + the spark and
#     test extras, hash-checked; scripts/lock.sh refreshes it), reinstalled only when pyproject.toml,
#     setup.py or the lock changed since the last install (the .venv/.installed stamp)
#   - bk-auditor installed (editable) and its protobuf code generated (auditor/_proto, not in git)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

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
