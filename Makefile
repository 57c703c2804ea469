# The two commands (see README.md): `make demo` and `make test`. Both do all set-up first.
.PHONY: setup demo test

setup:
	./scripts/setup.sh

demo: setup
	.venv/bin/python -m tests.realcluster.demo

test: setup
	.venv/bin/python -m pytest -q -ra tests
