# The two commands (README.md: "See it work" and "For developers"): `make demo` and `make test`. Both do
# all set-up first.
.PHONY: setup venv demo test lint fuzz chaos chaos-repair chaos-repair-smoke

setup:
	./scripts/setup.sh

# The Python virtualenv alone (.venv from requirements/dev.lock, protobuf code): all `make lint` needs.
venv:
	./scripts/venv.sh

demo: setup
	.venv/bin/python -m devcluster.demo

# Two pytest-xdist workers, each with its own real cluster on its own port slot (BK_TEST_PORT_SLOT and
# the next one), whole test files to one worker (module fixtures share a cluster): about 26 min on 2
# cores (docs/contributing.md). `pytest -q -ra tests` still runs it in one process.
test: setup lint
	.venv/bin/python -m pytest -q -ra -n 2 --dist loadfile tests

# Static checks (docs/contributing.md): ruff lint + format check, the layer contracts (.importlinter),
# mypy (configured in pyproject.toml: strict on all of auditor/). Needs only the virtualenv, not the cluster's
# set-up (ZooKeeper, a JDK, the BookKeeper jars).
lint: venv
	.venv/bin/ruff check auditor tests bench devcluster
	.venv/bin/ruff format --check auditor tests bench devcluster
	.venv/bin/lint-imports
	.venv/bin/mypy

# The long robustness campaign (docs/reliability.md): every property target with >= 100,000 inputs.
fuzz: setup
	HYPOTHESIS_PROFILE=fuzz .venv/bin/python -m pytest -q -p no:cacheprovider --timeout=0 \
	  --hypothesis-show-statistics tests/property

# The chaos campaign on the real cluster (docs/reliability.md, "Chaos campaign"): 200 rounds, seed 1,
# hours on 2 cores. Ports follow BK_TEST_PORT_SLOT; the JSON report goes to bench/results/chaos/.
chaos: setup
	.venv/bin/python -m bench.chaos --rounds 200 --seed 1

# The repair chaos campaign (docs/reliability.md, "Repair under chaos"): repair workers on, live Java
# writers, a bookie lost every round plus one more fault; 200 rounds, seed 1, hours on 2 cores.
chaos-repair: setup
	.venv/bin/python -m bench.chaos --repair --rounds 200 --seed 1

# Its smoke (self-test and two rounds), also part of `make test`.
chaos-repair-smoke: setup
	.venv/bin/python -m pytest -q -s -p no:cacheprovider tests/realcluster/chaos/test_chaos_repair.py
