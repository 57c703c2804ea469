"""The leader's active findings, saved in our own subtree so that they survive a failover: a new leader
starts from them, and a standby answers (and exports its gauges) from them, instead of everything reading
0 until each check's next pass (scrutiny daily, the ledger check weekly).

Only the findings above informational are kept (they are what alerts and `findings` act on; a Pulsar
cluster's informational `risky_quorum` findings, one per ledger, are rebuilt by the next scrutiny pass).
They are spread over SHARDS znodes `<root>/bk-auditor/findings/s-NN` by ledger, each zlib-compressed JSON
{"v": 1, "findings": [{"f": <Finding.to_wire()>, "c": check, "fs": first seen, "ls": last seen (epoch
seconds, exactly as the leader holds them), "n": timesSeen}, ...]}, so one change rewrites one shard, and a shard stays under ZooKeeper's 1 MB
(jute.maxbuffer) for about 10,000 findings. `<root>/bk-auditor/findings/manifest` is written after the
shards: {"v": 1, "savedBy", "savedAtMs", "shards": {"NN": crc32 of the shard's bytes}, "dropped": n}, listing
the shards that hold findings; a reader polls it and reads only the shards whose checksum moved. A shard over SHARD_BYTES_MAX keeps its most
severe findings and counts the rest as dropped. Parsing is strict: anything else is `CorruptZnodeError`
naming the znode.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from posixpath import join
from typing import Any

from auditor.durability.findings import Finding
from auditor.metadata.errors import CorruptZnodeError
from auditor.metadata.interfaces import WriteGuard
from auditor.metadata.own.recipe import MAX_MILLIS, OwnZnodeStore, parse_own_json, short_repr

SHARDS = 64
SHARD_BYTES_MAX = 900_000  # under ZooKeeper's default jute.maxbuffer (1 MB), with room for the request
FORMAT = 1


@dataclass(frozen=True, slots=True)
class SavedFinding:
    """One active finding as saved: the finding, the check that reported it, its sighting times."""

    finding: Finding
    check: str | None
    first_seen: float  # epoch seconds
    last_seen: float
    times_seen: int


@dataclass(frozen=True, slots=True)
class Manifest:
    saved_by: str
    saved_at_ms: int
    shards: Mapping[int, int]  # shard -> crc32 of its znode's bytes
    dropped: int = 0


@dataclass
class Snapshot:
    """What a reader holds of the saved findings: the manifest it read and each shard's findings."""

    manifest: Manifest | None = None
    shards: dict[int, list[SavedFinding]] = field(default_factory=dict)
    crcs: dict[int, int] = field(default_factory=dict)  # of the shards as read

    def findings(self) -> Iterable[SavedFinding]:
        for shard in sorted(self.shards):
            yield from self.shards[shard]


def shard_of(finding: Finding) -> int:
    """A finding's shard: by its ledger (a ledger's findings travel together), shard 0 without one."""
    ledger = finding.ledger
    if ledger is None:
        return 0
    return (ledger.scope * 1_000_003 + ledger.ledger) % SHARDS


def encode_shard(findings: list[SavedFinding]) -> tuple[bytes, int]:
    """A shard's znode bytes, and how many findings were left out to keep it under SHARD_BYTES_MAX (the
    least severe, then the newest)."""
    ordered = sorted(findings, key=lambda s: (s.finding.severity.rank, s.first_seen))
    keep = len(ordered)
    while True:
        doc = {"v": FORMAT, "findings": [_saved_json(s) for s in ordered[:keep]]}
        data = zlib.compress(json.dumps(doc, separators=(",", ":"), sort_keys=True).encode(), 6)
        if len(data) <= SHARD_BYTES_MAX or keep == 0:
            return data, len(ordered) - keep
        keep = keep * SHARD_BYTES_MAX * 9 // (len(data) * 10)  # shrink in proportion, with a margin


def _saved_json(s: SavedFinding) -> dict[str, Any]:
    return {
        "f": s.finding.to_wire(),
        "c": s.check,
        "fs": s.first_seen,
        "ls": s.last_seen,
        "n": s.times_seen,
    }


def parse_shard(data: bytes, path: str) -> list[SavedFinding]:
    what = "bk-auditor saved findings"
    try:
        raw = zlib.decompress(data)
    except zlib.error as exc:
        raise CorruptZnodeError(path, f"{what} are not zlib-compressed: {exc}") from None
    doc = parse_own_json(raw, path, what)
    if not isinstance(doc, dict) or doc.get("v") != FORMAT or not isinstance(doc.get("findings"), list):
        raise CorruptZnodeError(path, f'{what} are not {{"v": {FORMAT}, "findings": [...]}}')
    out = []
    for item in doc["findings"]:
        if not isinstance(item, dict) or not isinstance(item.get("f"), dict):
            raise CorruptZnodeError(path, f"{what}: an entry is not a saved finding: {short_repr(item)}")
        check = item.get("c")
        if check is not None and not isinstance(check, str):
            raise CorruptZnodeError(path, f"{what}: a check name is not text: {short_repr(check)}")
        first, last, times = _seconds(item, "fs", path), _seconds(item, "ls", path), item.get("n")
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise CorruptZnodeError(path, f"{what}: a sighting count is not a positive number: {short_repr(times)}")
        try:
            finding = Finding.from_wire(item["f"])
        except (KeyError, ValueError, TypeError) as exc:
            raise CorruptZnodeError(path, f"{what}: a finding does not parse: {exc!r}") from None
        out.append(SavedFinding(finding, check, first, last, times))
    return out


def _seconds(item: Mapping[str, Any], key: str, path: str) -> float:
    value = item.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_MILLIS / 1000:
        raise CorruptZnodeError(path, f"bk-auditor saved findings: {key} is not a time in seconds")
    return float(value)


def _millis(item: Mapping[str, Any], key: str, path: str) -> int:
    value = item.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_MILLIS:
        raise CorruptZnodeError(path, f"bk-auditor saved findings: {key} is not a time in milliseconds")
    return value


def encode_manifest(m: Manifest) -> bytes:
    return json.dumps(
        {
            "v": FORMAT,
            "savedBy": m.saved_by[:200],
            "savedAtMs": m.saved_at_ms,
            "shards": {f"{n:02d}": crc for n, crc in sorted(m.shards.items())},
            "dropped": m.dropped,
        },
        sort_keys=True,
    ).encode()


def parse_manifest(data: bytes, path: str) -> Manifest:
    what = "bk-auditor saved findings manifest"
    doc = parse_own_json(data, path, what)
    if not isinstance(doc, dict) or doc.get("v") != FORMAT:
        raise CorruptZnodeError(path, f'{what} is not a JSON object with "v": {FORMAT}')
    saved_by, shards, dropped = doc.get("savedBy"), doc.get("shards"), doc.get("dropped", 0)
    if not isinstance(saved_by, str):
        raise CorruptZnodeError(path, f"{what}: savedBy is not text")
    if isinstance(dropped, bool) or not isinstance(dropped, int) or dropped < 0:
        raise CorruptZnodeError(path, f"{what}: dropped is not a count")
    if not isinstance(shards, dict):
        raise CorruptZnodeError(path, f"{what}: shards is not an object")
    crcs: dict[int, int] = {}
    for name, crc in shards.items():
        if not (isinstance(name, str) and name.isdigit() and int(name) < SHARDS):
            raise CorruptZnodeError(path, f"{what}: {short_repr(name)} is not a shard number below {SHARDS}")
        if isinstance(crc, bool) or not isinstance(crc, int) or not 0 <= crc < 2**32:
            raise CorruptZnodeError(path, f"{what}: shard {name}'s checksum is not a crc32")
        crcs[int(name)] = crc
    return Manifest(saved_by, _millis(doc, "savedAtMs", path), crcs, dropped)


class SavedFindings:
    """The saved findings under `<root>/bk-auditor/findings`: written by the leader (guarded), read by
    anyone."""

    def __init__(self, store: OwnZnodeStore) -> None:
        self.store = store
        self.base = join(store.own_subtree, "findings")
        self.manifest_path = join(self.base, "manifest")
        self._written: dict[int, int] = {}  # shard -> crc32 last written by this writer

    def shard_path(self, shard: int) -> str:
        return join(self.base, f"s-{shard:02d}")

    async def save(self, findings: Iterable[SavedFinding], saved_by: str, now_ms: int, guard: WriteGuard) -> Manifest:
        """Write the shards that changed since this writer's last save, then the manifest, which lists the
        shards that hold findings (an empty shard this writer never wrote is not written at all). A failed
        write leaves the shards it did not write to the next save."""
        by_shard: dict[int, list[SavedFinding]] = {n: [] for n in range(SHARDS)}
        for s in findings:
            by_shard[shard_of(s.finding)].append(s)
        crcs: dict[int, int] = {}
        dropped = 0
        for shard, items in by_shard.items():
            if not items and shard not in self._written:
                continue  # empty and not written by this writer: left out of the manifest, not written
            data, left_out = encode_shard(items)
            dropped += left_out
            crc = zlib.crc32(data)
            if items:
                crcs[shard] = crc
            if self._written.get(shard) != crc:
                await self.store.put(self.shard_path(shard), data, guard)
                self._written[shard] = crc
        manifest = Manifest(saved_by, now_ms, crcs, dropped)
        await self.store.put(self.manifest_path, encode_manifest(manifest), guard)
        return manifest

    def forget_written(self) -> None:
        """Write every shard on the next save (a new leadership: another leader may have written since)."""
        self._written.clear()

    async def manifest(self) -> Manifest | None:
        data = await self.store.read_own(self.manifest_path)
        return None if data is None else parse_manifest(data, self.manifest_path)

    async def refresh(self, held: Snapshot) -> bool:
        """Bring `held` up to the saved state, reading only the shards whose checksum moved; True when
        anything changed. A corrupt shard raises CorruptZnodeError (the others read stay held)."""
        manifest = await self.manifest()
        if manifest is None:
            changed = held.manifest is not None or bool(held.shards)
            held.manifest, held.shards, held.crcs = None, {}, {}
            return changed
        changed = held.manifest != manifest
        held.manifest = manifest
        for shard in list(held.shards):
            if shard not in manifest.shards:
                del held.shards[shard]
                held.crcs.pop(shard, None)
                changed = True
        for shard, crc in manifest.shards.items():
            if held.crcs.get(shard) == crc:
                continue
            path = self.shard_path(shard)
            data = await self.store.read_own(path)
            held.shards[shard] = [] if data is None else parse_shard(data, path)
            held.crcs[shard] = zlib.crc32(data) if data is not None else -1
            changed = True
        return changed
