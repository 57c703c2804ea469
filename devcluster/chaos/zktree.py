"""Whole-tree ZooKeeper snapshots and the diff the campaign checks against a narrow allow-list.

A snapshot records, for every znode from `/`, its data, data version, ACL version, child-list version,
creation zxid, ephemeral owner and child names. `diff` lists what was created, deleted or changed
between two snapshots; `Allowance.violations` returns the changes nobody was allowed to make:

* **ours**: anything under `<root>/bk-auditor` (the daemon's subtree) and under
  `<root>/underreplication/ledgers` (markers in Java's layout: four levels of 4-hex-digit directories,
  then `urL<id>`; any other name there is a violation);
* **bookies**: the registration of a cluster bookie (`<root>/available/<id>`,
  `<root>/available/readonly/<id>`), and the cookie of a bookie the campaign wiped in that window;
* **the campaign itself**: exact paths it wrote in that window (a rewritten ledger, a deleted cookie), and
  in a heal window the ledgers the Java tool created or deleted (with their new parent directories) and
  the tool's id generator (`<root>/idgen`, whose children come and go);
* a parent's child-list version may change only when every child that came or went is itself allowed,
  or (children created and deleted between two snapshots) when it is one of the parents listed above.

Everything else, e.g. the Java auditor's election or lock nodes, `LAYOUT`, `lostBookieRecoveryDelay`,
`/bookies`, a ledger's metadata, anything outside the ledgers root, is a violation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from posixpath import dirname, join

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError


@dataclass(frozen=True)
class Node:
    data: bytes
    version: int
    aversion: int
    cversion: int
    czxid: int
    owner: int
    children: frozenset[str]


Snapshot = dict[str, Node]


def snapshot(zk: KazooClient, top: str = "/") -> Snapshot:
    """Every znode under `top` (inclusive), level by level with asynchronous reads."""
    out: Snapshot = {}
    level = [top]
    while level:
        gets = [(p, zk.get_async(p), zk.get_children_async(p)) for p in level]
        level = []
        for path, got, kids in gets:
            try:
                data, stat = got.get(timeout=30)
                children = kids.get(timeout=30)
            except NoNodeError:
                continue  # deleted while we walked: the next snapshot sees it gone
            out[path] = Node(
                data or b"",
                stat.version,
                stat.aversion,
                stat.cversion,
                stat.czxid,
                stat.ephemeralOwner,
                frozenset(children),
            )
            level += [join(path, c) for c in children]
    return out


@dataclass(frozen=True)
class Change:
    path: str
    kind: str  # created | deleted | changed | children
    detail: str = ""
    children: tuple[str, ...] = ()  # for "children": the child names that came or went

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "kind": self.kind, "detail": self.detail}


def diff(before: Snapshot, after: Snapshot) -> list[Change]:
    out: list[Change] = []
    for path in sorted(set(before) | set(after)):
        a, b = before.get(path), after.get(path)
        if a is None:
            out.append(Change(path, "created"))
        elif b is None:
            out.append(Change(path, "deleted"))
        elif a.czxid != b.czxid:
            out.append(Change(path, "changed", "re-created"))
        else:
            what = [
                n
                for n, x, y in (
                    ("data", a.data, b.data),
                    ("version", a.version, b.version),
                    ("acl", a.aversion, b.aversion),
                    ("owner", a.owner, b.owner),
                )
                if x != y
            ]
            if what:
                out.append(Change(path, "changed", ",".join(what)))
            elif a.cversion != b.cversion:
                gone, new = sorted(a.children - b.children), sorted(b.children - a.children)
                out.append(Change(path, "children", f"+{new} -{gone}", tuple(new + gone)))
    return out


MARKER_DIR = re.compile(r"^[0-9a-f]{4}$")
MARKER_LEAF = re.compile(r"^urL[0-9]{10,}$")


@dataclass
class Allowance:
    """Who may change what in one window (see the module docstring)."""

    root: str
    bookie_ids: set[str]
    wiped: set[str] = field(default_factory=set)  # bookies whose cookie the campaign deleted
    written: set[str] = field(default_factory=set)  # exact paths the campaign wrote
    tool_ledgers: set[str] = field(default_factory=set)  # ledger znodes the Java tool created/deleted
    heal: bool = False  # the Java tool ran in this window

    def _ours(self, path: str) -> bool:
        sub = join(self.root, "bk-auditor")
        if path == sub or path.startswith(sub + "/"):
            return True
        markers = join(self.root, "underreplication", "ledgers")
        if path == markers:
            return True
        if not path.startswith(markers + "/"):
            return False
        parts = path[len(markers) + 1 :].split("/")
        return (len(parts) <= 4 and all(MARKER_DIR.match(p) for p in parts)) or (
            len(parts) == 5 and all(MARKER_DIR.match(p) for p in parts[:4]) and bool(MARKER_LEAF.match(parts[4]))
        )

    def _bookies(self, path: str) -> bool:
        for parent in (join(self.root, "available"), join(self.root, "available", "readonly")):
            if dirname(path) == parent and path.rsplit("/", 1)[1] in self.bookie_ids:
                return True
        return dirname(path) == join(self.root, "cookies") and path.rsplit("/", 1)[1] in self.wiped

    def _campaign(self, path: str) -> bool:
        if path in self.written or path in self.tool_ledgers:
            return True
        if self.heal and (path.startswith(join(self.root, "idgen") + "/")):
            return True
        # A new hierarchical directory above a ledger the tool created.
        return (
            self.heal
            and any(led.startswith(path + "/") for led in self.tool_ledgers)
            and path.startswith(self.root + "/")
            and path.rsplit("/", 1)[1].isdigit()
        )

    def allowed_path(self, path: str) -> bool:
        return self._ours(path) or self._bookies(path) or self._campaign(path)

    def _transient_parents(self) -> set[str]:
        out = {join(self.root, "available"), join(self.root, "available", "readonly")}
        if self.wiped:
            out.add(join(self.root, "cookies"))
        if self.heal:
            out.add(join(self.root, "idgen"))
            out |= {dirname(p) for p in self.tool_ledgers}
        return out

    def violations(self, changes: Iterable[Change]) -> list[Change]:
        bad = []
        for c in changes:
            if self.allowed_path(c.path):
                continue
            if c.kind == "children":
                if c.children and all(self.allowed_path(join(c.path, n)) for n in c.children):
                    continue
                if not c.children and c.path in self._transient_parents():
                    continue
            bad.append(c)
        return bad
