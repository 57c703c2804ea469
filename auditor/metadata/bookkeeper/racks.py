"""Bookie -> rack ("network location") maps. Spec §7.

Three sources, all answering for a batch of bookie ids:
* Pulsar's `/bookies` JSON at the metadata-store root (§7.3 semantics),
* a static YAML or JSON file mapping bookie id or host -> rack,
* a script, like Java's ScriptBasedMapping (hosts as arguments, at most 100 per call, one
  whitespace-separated rack per argument, racks start with '/').
Unknown bookies get the default rack.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import yaml

from auditor.files import safeyaml
from auditor.logging import get_logger
from auditor.metadata.codecs.formats import parse_host_port
from auditor.metadata.errors import CorruptZnodeError, MetadataConfigError

log = get_logger("auditor.metadata.racks")

DEFAULT_RACK = "/default-rack"
DEFAULT_REGION_RACK = "/default-region/default-rack"
SCRIPT_MAX_ARGS = 100

HostOf = Callable[[str], Awaitable[str | None]]  # bookie id -> host (or None when unknown)


class RackResolver(Protocol):
    async def racks(self, bookie_ids: Iterable[str]) -> dict[str, str]: ...


def normalise_rack(rack: object) -> str | None:
    """Pulsar's rules: empty or '/' means unknown; a missing leading '/' is added."""
    if not isinstance(rack, str):
        return None
    rack = rack.strip()
    if not rack or rack == "/":
        return None
    return rack if rack.startswith("/") else "/" + rack


async def _default_host(bookie_id: str) -> str | None:
    hp = parse_host_port(bookie_id)
    return hp[0] if hp else None


# ---------------------------------------------------------------- static maps (file, Pulsar JSON)


class StaticRackMap:
    """A bookie id / host -> rack table. Lookup: bookie id first, then its host."""

    def __init__(
        self,
        table: Mapping[str, str],
        *,
        default_rack: str = DEFAULT_RACK,
        host_of: HostOf | None = None,
        source: str = "<table>",
    ) -> None:
        self.table = dict(table)
        self.default_rack = default_rack
        self.host_of = host_of or _default_host
        self.source = source

    async def racks(self, bookie_ids: Iterable[str]) -> dict[str, str]:
        out = {}
        for b in bookie_ids:
            rack = self.table.get(b)
            if rack is None:
                host = await self.host_of(b)
                rack = self.table.get(host) if host else None
            out[b] = rack or self.default_rack
        return out


def load_rack_file(
    path: str | Path, *, default_rack: str = DEFAULT_RACK, host_of: HostOf | None = None
) -> StaticRackMap:
    """A YAML or JSON file: either a flat `{bookie-or-host: rack}` mapping or `{"racks": {...}}`."""
    p = Path(path)
    kind = "JSON" if p.suffix.lower() == ".json" else "YAML"
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise MetadataConfigError(f"rack file {p}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise MetadataConfigError(f"rack file {p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        doc = json.loads(text) if kind == "JSON" else safeyaml.load(text)
    except (ValueError, yaml.YAMLError) as exc:  # JSONDecodeError is a ValueError, as is a huge YAML int
        raise MetadataConfigError(f"rack file {p}: not valid {kind}: {' '.join(str(exc).split())[:300]}") from None
    except RecursionError:
        raise MetadataConfigError(f"rack file {p}: {kind} nested too deeply") from None
    if isinstance(doc, dict) and isinstance(doc.get("racks"), dict):
        doc = doc["racks"]
    if not isinstance(doc, dict):
        raise MetadataConfigError(f"rack file {p}: expected a mapping of bookie id or host to rack")
    table = {}
    for key, rack in doc.items():
        norm = normalise_rack(rack)
        if norm is None:
            raise MetadataConfigError(f"rack file {p}: entry {key!r} has no usable rack ({rack!r})")
        table[str(key)] = norm
    return StaticRackMap(table, default_rack=default_rack, host_of=host_of, source=str(p))


def parse_pulsar_bookies_json(data: bytes, path: str = "/bookies") -> dict[str, dict[str, Any]]:
    """`{group: {bookieId: {"rack": ..., "hostname": ...}}}` -> {bookieId: info} (all groups merged).
    CorruptZnodeError naming `path` when the content is not that."""
    try:
        doc = json.loads(data.decode("utf-8")) if data else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptZnodeError(path, f"not valid JSON ({exc})") from None
    except RecursionError:
        raise CorruptZnodeError(path, "JSON nested too deeply") from None
    if not isinstance(doc, dict):
        raise CorruptZnodeError(path, "expected an object of groups")
    out: dict[str, dict[str, Any]] = {}
    for group, members in doc.items():
        if not isinstance(members, dict):
            raise CorruptZnodeError(path, f"group {group!r} is not an object")
        for bookie, info in members.items():
            if isinstance(info, dict) and bookie not in out:
                out[bookie] = {**info, "group": group}
    return out


def pulsar_rack_map(
    data: bytes, *, path: str = "/bookies", default_rack: str = DEFAULT_RACK, host_of: HostOf | None = None
) -> StaticRackMap:
    """Rack map from Pulsar's `/bookies` content: keyed by bookie id, and by its `hostname` if given."""
    table: dict[str, str] = {}
    for bookie, info in parse_pulsar_bookies_json(data, path).items():
        rack = normalise_rack(info.get("rack"))
        if rack is None:
            continue  # unknown -> default rack, as in Pulsar
        table[bookie] = rack
        host = info.get("hostname")
        if isinstance(host, str) and host:
            table.setdefault(host, rack)
    return StaticRackMap(table, default_rack=default_rack, host_of=host_of, source=path)


# ---------------------------------------------------------------- script (ScriptBasedMapping)


class ScriptRackResolver:
    """Runs `script host1 host2 ...` (<= 100 hosts a call) and reads one rack per host from its output."""

    def __init__(
        self,
        script: str | Path,
        *,
        default_rack: str = DEFAULT_RACK,
        host_of: HostOf | None = None,
        max_args: int = SCRIPT_MAX_ARGS,
        timeout: float = 30.0,
    ) -> None:
        self.script = str(script)
        if not Path(self.script).is_file():
            raise MetadataConfigError(f"rack script {self.script}: no such file")
        self.default_rack = default_rack
        self.host_of = host_of or _default_host
        self.max_args = max_args
        self.timeout = timeout
        self._cache: dict[str, str] = {}

    async def racks(self, bookie_ids: Iterable[str]) -> dict[str, str]:
        ids = list(bookie_ids)
        hosts = {b: (await self.host_of(b)) for b in ids}
        todo = sorted({h for h in hosts.values() if h and h not in self._cache})
        for i in range(0, len(todo), self.max_args):
            chunk = todo[i : i + self.max_args]
            self._cache.update(zip(chunk, await self._run(chunk)))
        return {b: (self._cache.get(h) if h else None) or self.default_rack for b, h in hosts.items()}

    async def _run(self, hosts: list[str]) -> list[str]:
        try:
            proc = await asyncio.create_subprocess_exec(
                self.script, *hosts, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
        except OSError as exc:
            raise MetadataConfigError(f"rack script {self.script}: cannot run ({exc.strerror or exc})") from None
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await proc.communicate()
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise MetadataConfigError(f"rack script {self.script}: no answer within {self.timeout}s") from None
        if proc.returncode != 0:
            raise MetadataConfigError(
                f"rack script {self.script}: exit code {proc.returncode}: {err.decode(errors='replace').strip()[:200]}"
            )
        racks = out.decode(errors="replace").split()
        if len(racks) != len(hosts):
            raise MetadataConfigError(f"rack script {self.script}: printed {len(racks)} racks for {len(hosts)} hosts")
        for host, rack in zip(hosts, racks):
            if not rack.startswith("/"):
                raise MetadataConfigError(
                    f"rack script {self.script}: rack {rack!r} for {host} does not start with '/'"
                )
        return racks
