"""Simulated bookies for scale benchmarks: asyncio servers speaking the bookie v3 protocol (and v2 READENTRY
and BATCH_READ_ENTRY) that answer from the write schedule, read-only, for many ledgers at O(1) memory each
(planted layouts).

    async with SimBookies(PlantedSource(1_000_000, ids), {i: address(i) for i in ids}) as sim: ...
    .venv/bin/python -m devcluster.simbookie planted --ledgers 1000000 --bookies 127.0.0.1:5261,...

They pass the same protocol tests as the real 4.17.3 bookie (tests/realcluster/devcluster/test_simbookie.py: the same
requests get byte-identical replies), which is what makes them fit to stand in for real bookies at a
scale the test machine cannot host. Modules: `stored` (what a bookie holds: the schedule, the entry
bytes, the entry-list encoding), `sources` (planted or from ZooKeeper), `replies` (one request, one
reply; faults), `v2replies` (the same for v2 frames), `server` (the sockets), `__main__` (run them as a
process of their own).
"""

from .replies import BookieView, Faults
from .server import SimBookies
from .sources import LedgerSource, PlantedSource, SnapshotSource
from .stored import WrittenLedger

__all__ = ["BookieView", "Faults", "LedgerSource", "PlantedSource", "SimBookies", "SnapshotSource", "WrittenLedger"]
