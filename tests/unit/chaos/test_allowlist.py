"""The chaos campaign's ZooKeeper allow-list (devcluster/chaos/zktree.py): what it lets through
and what it flags, on hand-made snapshots. The campaign's smoke test checks the same on the real tree."""

from __future__ import annotations

from devcluster.chaos.zktree import Allowance, Node, diff

R = "/ledgers"
BOOKIES = {"127.0.0.1:3181", "localhost:3185"}


def node(
    data: bytes = b"",
    version: int = 0,
    cversion: int = 0,
    czxid: int = 1,
    owner: int = 0,
    children: tuple[str, ...] = (),
) -> Node:
    return Node(data, version, 0, cversion, czxid, owner, frozenset(children))


def base() -> dict[str, Node]:
    return {
        "/": node(children=("ledgers", "zookeeper")),
        "/zookeeper": node(),
        R: node(children=("available", "cookies", "underreplication", "bk-auditor", "LAYOUT", "00", "idgen")),
        f"{R}/LAYOUT": node(b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1\n"),
        f"{R}/available": node(children=("readonly", "127.0.0.1:3181")),
        f"{R}/available/readonly": node(),
        f"{R}/available/127.0.0.1:3181": node(b"x", owner=7),
        f"{R}/cookies": node(children=("127.0.0.1:3181",)),
        f"{R}/cookies/127.0.0.1:3181": node(b"cookie"),
        f"{R}/underreplication": node(children=("lostBookieRecoveryDelay",)),
        f"{R}/underreplication/lostBookieRecoveryDelay": node(b"60"),
        f"{R}/bk-auditor": node(children=("election",)),
        f"{R}/bk-auditor/election": node(),
        f"{R}/idgen": node(),
        f"{R}/00": node(children=("0000",)),
        f"{R}/00/0000": node(children=("L0001",)),
        f"{R}/00/0000/L0001": node(b"meta"),
    }


def with_(snap: dict[str, Node], **changes: Node | None) -> dict[str, Node]:
    out = dict(snap)
    for path, n in changes.items():
        path = path.replace("__", "/")
        if n is None:
            out.pop(path, None)
        else:
            out[path] = n
    return out


def violations(before: dict[str, Node], after: dict[str, Node], **kw: object) -> list[str]:
    allow = Allowance(R, set(BOOKIES), **kw)  # type: ignore[arg-type]
    return [c.path for c in allow.violations(diff(before, after))]


def test_markers_and_our_subtree_are_allowed() -> None:
    b = base()
    a = dict(b)
    a[f"{R}/underreplication"] = node(cversion=1, children=("lostBookieRecoveryDelay", "ledgers"))
    for p in ("ledgers", "ledgers/0000", "ledgers/0000/0000", "ledgers/0000/0000/0000", "ledgers/0000/0000/0000/0001"):
        a[f"{R}/underreplication/{p}"] = node()
    a[f"{R}/underreplication/ledgers/0000/0000/0000/0001/urL0000000001"] = node(b'replica: "127.0.0.1:3181"\n')
    a[f"{R}/bk-auditor/election"] = node(cversion=3, children=("V_0000000003",))
    a[f"{R}/bk-auditor/election/V_0000000003"] = node(b"auditor-b", owner=9)
    a[f"{R}/bk-auditor"] = node(cversion=1, children=("election", "checks"))
    a[f"{R}/bk-auditor/checks"] = node()
    assert violations(b, a) == []


def test_a_malformed_marker_path_is_flagged() -> None:
    b = base()
    a = dict(b)
    a[f"{R}/underreplication/ledgers"] = node(children=("zz",))
    a[f"{R}/underreplication/ledgers/zz"] = node()
    a[f"{R}/underreplication"] = node(cversion=1, children=("lostBookieRecoveryDelay", "ledgers"))
    assert violations(b, a) == [f"{R}/underreplication/ledgers/zz"]


def test_bookie_registrations_come_and_go() -> None:
    b = base()
    a = dict(b)
    a[f"{R}/available/127.0.0.1:3181"] = node(b"x", czxid=50, owner=8)  # re-registered after a restart
    a[f"{R}/available/readonly/localhost:3185"] = node(b"y", owner=9)
    a[f"{R}/available/readonly"] = node(cversion=1, children=("localhost:3185",))
    a[f"{R}/available"] = node(cversion=2, children=("readonly", "127.0.0.1:3181"))  # flapped in between
    assert violations(b, a) == []
    # A registration of a bookie that is not ours is not.
    a[f"{R}/available/10.0.0.9:3181"] = node(b"z")
    a[f"{R}/available"] = node(cversion=3, children=("readonly", "127.0.0.1:3181", "10.0.0.9:3181"))
    assert violations(b, a) == [f"{R}/available", f"{R}/available/10.0.0.9:3181"]


def test_a_cookie_changes_only_for_a_wiped_bookie() -> None:
    b = base()
    a = with_(b, **{f"{R}/cookies/127.0.0.1:3181".replace("/", "__"): node(b"new", czxid=60)})
    assert violations(b, a) == [f"{R}/cookies/127.0.0.1:3181"]
    assert violations(b, a, wiped={"127.0.0.1:3181"}) == []


def test_java_auditor_nodes_ledger_metadata_and_the_delay_are_flagged() -> None:
    b = base()
    a = dict(b)
    a[f"{R}/underreplication"] = node(cversion=1, children=("lostBookieRecoveryDelay", "auditorelection"))
    a[f"{R}/underreplication/auditorelection"] = node()
    a[f"{R}/underreplication/lostBookieRecoveryDelay"] = node(b"60", version=1)
    a[f"{R}/00/0000/L0001"] = node(b"meta2", version=1)
    a["/wrongroot"] = node()
    a["/"] = node(cversion=1, children=("ledgers", "zookeeper", "wrongroot"))
    assert set(violations(b, a)) == {
        "/",
        "/wrongroot",
        f"{R}/00/0000/L0001",
        f"{R}/underreplication",
        f"{R}/underreplication/auditorelection",
        f"{R}/underreplication/lostBookieRecoveryDelay",
    }
    # The campaign's own write is excused only by its exact path.
    assert f"{R}/00/0000/L0001" not in violations(b, a, written={f"{R}/00/0000/L0001"})


def test_heal_window_lets_the_java_tool_create_and_delete_its_ledgers() -> None:
    b = base()
    a = dict(b)
    del a[f"{R}/00/0000/L0001"]
    a[f"{R}/00/0000"] = node(cversion=2, children=("L0002",))
    a[f"{R}/00/0000/L0002"] = node(b"meta")
    a[f"{R}/idgen"] = node(cversion=4)  # ID- nodes created and deleted in between
    tool = {f"{R}/00/0000/L0001", f"{R}/00/0000/L0002"}
    assert violations(b, a, heal=True, tool_ledgers=tool) == []
    assert violations(b, a) == [f"{R}/00/0000", f"{R}/00/0000/L0001", f"{R}/00/0000/L0002", f"{R}/idgen"]
