"""Pulsar's references to ledgers in ZooKeeper, read only: managed-ledger, cursor and schema znodes
(`formats`, pure) and where they are listed (`references`)."""
