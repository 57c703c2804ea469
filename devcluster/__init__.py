"""Development machinery shared by the tests, the demo and the benchmarks; not in the wheel.

Real clusters on loopback and the ports they listen on (`cluster/`, `ports.py`), test certificates
(`certs.py`), the Java tools run against a cluster (`java/`, their jars' poms in `bk-jars/` and
`ml-jars/`), helpers that run our checks, command and daemons against a cluster (`checks_util.py`,
`cli_util.py`, `daemon_util.py`, `metadata_helpers.py`, `zkwriters.py`), planted ledgers and simulated
bookies for scale (`planted.py`, `simbookie/`), the chaos campaign (`chaos/`), the demo (`python -m
devcluster.demo`, `make demo`) and the operator walkthrough (`python -m devcluster.walkthrough`).

The tests (`tests/`) and the benchmarks (`bench/`) import this package; it imports neither of them.
"""
