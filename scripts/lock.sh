#!/usr/bin/env bash
# Pin the dependencies of pyproject.toml, with hashes, for CPython 3.11 on any platform:
#   requirements/dev.lock      runtime + the `spark` and `test` extras: what `make setup` installs
#   requirements/runtime.lock  runtime only, at the same versions: what deploy/Dockerfile installs
#   requirements/build.lock    the wheel's build requirements (setuptools, wheel, grpcio-tools), at the
#                              same versions: the image's build stage (generated code matches protobuf)
#
#   scripts/lock.sh                      # after editing pyproject.toml: keep every pin that still fits
#   scripts/lock.sh --upgrade            # move every pin to the newest version pyproject.toml allows
#   scripts/lock.sh --upgrade-package X  # move one
# then `make setup` (it reinstalls when the lock changed) and the tests. Needs uv (from PATH, or installed
# into .venv on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-}
if [ -z "$UV" ]; then
  if command -v uv >/dev/null; then
    UV=uv
  else
    [ -x .venv/bin/uv ] || .venv/bin/python -m pip install -q uv
    UV=.venv/bin/uv
  fi
fi
common=(--generate-hashes --universal --python-version 3.11 --quiet --custom-compile-command scripts/lock.sh)
"$UV" pip compile pyproject.toml --extra spark --extra test "${common[@]}" "$@" -o requirements/dev.lock
"$UV" pip compile pyproject.toml "${common[@]}" -c requirements/dev.lock -o requirements/runtime.lock
# [build-system] requires of pyproject.toml
python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))' |
  "$UV" pip compile - "${common[@]}" -c requirements/dev.lock -o requirements/build.lock
echo "wrote requirements/dev.lock, requirements/runtime.lock and requirements/build.lock"
