"""The smoke version of `bench/batch_read.py` on the session cluster's DbLedgerStorage bookie: both readers
agree on every entry's bytes, and the batch reader asks in one request per `max_count` entries. Counts,
never times."""

from __future__ import annotations

import pytest

from bench.batch_read import measure
from devcluster.cluster import Cluster

pytestmark = pytest.mark.realcluster

DB_BOOKIE = 6  # tests/conftest.py: bookies 1-5 SortedLedgerStorage, 6 DbLedgerStorage


async def test_both_readers_agree_and_batches_are_counted(cluster: Cluster) -> None:
    db = cluster.bookie(DB_BOOKIE).bookie_id
    ledger = cluster.create_ledger(ensemble=1, write_quorum=1, ack_quorum=1, entries=250, entry_size=100, bookies=[db])
    row = await measure(cluster, DB_BOOKIE, ledger["ledgerId"], 250, repeat=1, max_count=100)
    assert row["entries"] == 250 and row["v3_read_entry_per_s"] > 0 and row["v2_batch_per_s"] > 0
    assert row["batch_requests"] == 1 + 3  # the warm-up's one batch of 10, then 100 + 100 + 50
