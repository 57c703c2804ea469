"""Benchmarks and long campaigns, run as modules from the repository root: `python -m bench.<name>`
(docs/benchmarks.md, docs/reliability.md). Not tests: nothing here asserts a speed."""
