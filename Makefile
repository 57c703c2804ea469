# The two commands (see README.md): `make demo` and `make test`. Both do all set-up first.
.PHONY: setup demo test lint fuzz chaos

setup:
	./scripts/setup.sh

demo: setup
	.venv/bin/python -m tests.realcluster.demo

# One process, test files in order. (`pytest -n 2 --dist loadfile` runs two workers, each with its own
# real cluster on its own port slot, in about 19-21 min instead of about 32; not the default yet: in other
# file orders tests/realcluster/test_daemon_resilience.py failed, see docs/contributing.md.)
test: setup lint
	.venv/bin/python -m pytest -q -ra tests

# Static checks (docs/contributing.md): ruff lint + format check, the layer contracts (.importlinter),
# mypy (configured in pyproject.toml: strict on auditor/durability, auditor/bookie, auditor/aio, auditor/repair).
lint: setup
	.venv/bin/ruff check auditor tests bench
	.venv/bin/ruff format --check auditor tests bench
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
