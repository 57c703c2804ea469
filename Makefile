# The two commands (see README.md): `make demo` and `make test`. Both do all set-up first.
.PHONY: setup demo test fuzz

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
