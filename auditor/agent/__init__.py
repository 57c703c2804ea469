"""The bookie-side index agent (`bk-auditor agent`, docs/agent.md): a read-only gRPC service that runs
beside a DbLedgerStorage bookie, answers which entries of a ledger the bookie's RocksDB location index
holds, and verifies stored copies' digests from the entry logs, without ever writing the bookie's files.

Modules: `codecs` (the on-disk key, value and framing formats, pure), `index` (the RocksDB indexes, opened
as secondary instances from a mirror in the agent's scratch directory), `entrylog` (entry bytes at an
indexed location), `bookieconf` (directories and bookie id from bk_server.conf and the cookie),
`access` (bearer token and bind policy), `metrics`, `service` (the gRPC servicer), `main` (the process).
"""
