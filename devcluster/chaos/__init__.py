"""The chaos campaign on the real cluster (`bench/chaos.py`, `make chaos`; smoke test in
tests/realcluster/chaos/test_chaos.py). See docs/reliability.md, section "Chaos campaign"."""
