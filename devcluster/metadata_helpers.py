"""Shared helpers of the metadata real-cluster tests (opening a store, a won test election, Java's toString);
the `store` fixture is in tests/realcluster/conftest.py."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator, Iterable

from auditor.durability.model import DigestType, LedgerMetadata, LedgerState
from auditor.metadata.bookkeeper.election import LeaderElection
from auditor.metadata.store import ZooKeeperMetadataStore

JAVA_DIGEST = {
    "CRC32": DigestType.CRC32,
    "CRC32C": DigestType.CRC32C,
    "MAC": DigestType.HMAC,
    "DUMMY": DigestType.DUMMY,
}


async def open_store(uri: str, **kw) -> ZooKeeperMetadataStore:
    return await ZooKeeperMetadataStore.connect(uri, **kw)


async def mark_lost(store: ZooKeeperMetadataStore, victim: str, ledgers: Iterable[int]) -> None:
    """Mark `ledgers` under-replicated for the lost bookie `victim` as our auditor marks them (a won
    election on a test path guards the writes)."""
    from devcluster import zkwriters

    election = await leader_of(store)
    try:
        await zkwriters.ensure_underreplication_layout(store, election.guard)
        for lid in ledgers:
            await store.mark_underreplicated(lid, [victim], election.guard)
    finally:
        await election.close()


async def leader_of(store: ZooKeeperMetadataStore, name: str | None = None) -> LeaderElection:
    """A won election on a private test path (never Java's auditorelection)."""
    path = f"{store.root}/bk-auditor/test-election-{name or uuid.uuid4().hex[:8]}"
    e = LeaderElection(store.bridge, path, "auditor-py-test:1", ledgers_root=store.root)
    await e.start()
    await e.wait_leader(30)
    return e


def java_to_string(md: LedgerMetadata) -> str:
    """What Java's LedgerMetadataImpl.toString() prints (the `ledgermetadata` shell output)."""
    parts = [
        f"formatVersion={md.format_version}",
        f"ensembleSize={md.ensemble_size}",
        f"writeQuorumSize={md.write_quorum}",
        f"ackQuorumSize={md.ack_quorum}",
        f"state={md.state.name}",
    ]
    if md.state is LedgerState.CLOSED:
        parts += [f"length={md.length}", f"lastEntryId={md.last_entry_id}"]
    if md.password is not None:
        digest = "MAC" if md.digest_type is DigestType.HMAC else md.digest_type.name
        parts += [f"digestType={digest}", "password=base64:" + base64.b64encode(md.password).decode()]
    ens = ", ".join(f"{s.first_entry_id}=[{', '.join(s.ensemble)}]" for s in md.segments)
    parts.append("ensembles={" + ens + "}")
    custom = ", ".join(f"{k}=base64:{base64.b64encode(v).decode()}" for k, v in md.custom_metadata.items())
    parts.append("customMetadata={" + custom + "}")
    return "LedgerMetadata{" + ", ".join(parts) + "}"


def listunderreplicated(cluster) -> dict[int, dict]:
    """Parse `listunderreplicated -printmissingreplica -printreplicationworkerid`:
    {ledger: {"ctime": int, "replicas": [...], "worker": the lock holder Java reads, or None}}."""
    out = cluster.shell("listunderreplicated", "-printmissingreplica", "-printreplicationworkerid").stdout
    found: dict[int, dict] = {}
    current = None
    for line in out.splitlines():
        if line.strip().isdigit() and not line.startswith("\t"):
            current = found.setdefault(int(line.strip()), {"ctime": None, "replicas": [], "worker": None})
        elif line.startswith("\tCtime : ") and current is not None:
            current["ctime"] = int(line.split(":", 1)[1])
        elif line.startswith("\tMissingReplica : ") and current is not None:
            current["replicas"].append(line.split(":", 1)[1].strip())
        elif line.startswith("\tReplicationWorkerId : ") and current is not None:
            current["worker"] = line.split(":", 1)[1].strip()
    return found


async def collect(it: AsyncIterator) -> list:
    return [x async for x in it]


def zk_tree(kazoo, top: str = "/") -> dict[str, tuple[int, int]]:
    """Every znode under `top` (inclusive) -> (mzxid, pzxid): any create, delete or set changes it."""
    from kazoo.exceptions import NoNodeError

    out: dict[str, tuple[int, int]] = {}
    stack = [top]
    while stack:
        path = stack.pop()
        try:
            children, stat = kazoo.get_children(path, include_data=True)
        except NoNodeError:
            continue
        out[path] = (stat.mzxid, stat.pzxid)
        stack.extend(f"{path.rstrip('/')}/{c}" for c in children)
    return out
