# The two commands (see README.md): `make demo` and `make test`. Both do all set-up first.
.PHONY: setup demo test fuzz chaos

setup:
	./scripts/setup.sh

demo: setup
	.venv/bin/python -m tests.realcluster.demo

test: setup
	.venv/bin/python -m pytest -q -ra tests

# The long robustness campaign (docs/reliability.md): every property target with >= 100,000 inputs.
fuzz: setup
	HYPOTHESIS_PROFILE=fuzz .venv/bin/python -m pytest -q -p no:cacheprovider --timeout=0 \
	  --hypothesis-show-statistics tests/property

# The chaos campaign on the real cluster (docs/reliability.md, "Chaos campaign"): 200 rounds, seed 1,
# hours on 2 cores. Ports follow BK_TEST_PORT_SLOT; the JSON report goes to bench/results/chaos/.
chaos: setup
	.venv/bin/python -m bench.chaos --rounds 200 --seed 1
