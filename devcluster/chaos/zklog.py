"""Ground truth for "no write without the lock": the real ZooKeeper's transaction log, and who sent what.

Issue 39's invariant 4 must not be judged by bk-auditor's own account of its locks. ZooKeeper writes every
change it applied, in order, with the session that made it, to its transaction log; this module reads
that log with ZooKeeper's own reader (`devcluster/java/ZkTxnDump.java`: FileTxnLog's iterator and the jute
txn records, the classes the server replays the log with; it walks every log file from a zxid on, so
rolls and restarts are seen in order) and turns it into `TxnRecord`s, a multi's sub-operations one record
each. TxnLogToolkit prints times to the second only and data raw, which is why it is not parsed here.

The analysers are pure functions over the records, with their own parsing of ledger and lock paths (not
the auditor's): lock intervals (`lock_intervals`), metadata changes outside the writer's session and
outside a held lock (`metadata_writes_without_lock`), ledger znodes created again after a delete
(`recreated_ledgers`), session lifetimes (`session_spans`), and RECOVERY_ADDs seen at the bookie proxy
that no lock of the sender covers (`adds_without_lock`). A session is tied to a process by
`SessionSampler` (ZooKeeper's `cons` four-letter word gives each connection's client port and session;
/proc gives the port's owner, see `procnet`).

What the log cannot say: whether a setData was version-checked (ZooKeeper logs the resulting version, not
the expected one), and whether a closeSession was a close or an expiry.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from devcluster.cluster.errors import HarnessError
from devcluster.cluster.javatools import BK_HOME, ZK_JARS, compile_once

from .procnet import pids_of_peers

DUMP_SOURCE = Path(__file__).resolve().parent.parent / "java" / "ZkTxnDump.java"
ZK_CLASSPATH = (*ZK_JARS, "/usr/share/java/zookeeper-jute.jar")
# How long after a lock's end an add may still reach the proxy (it was sent while the lock was held).
END_SLACK_SECONDS = 0.2


class _HasZk(Protocol):
    workdir: Path
    zk_port: int


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """One change ZooKeeper applied (or, for `failed`, logged and rolled back)."""

    time: int  # ms since the epoch, the server's clock when it logged the txn
    session: int  # the session that sent it (for createSession/closeSession: the session itself)
    zxid: int
    cxid: int
    # create | delete | setData | check | setACL | createSession | closeSession | error | other
    type: str
    path: str | None = None
    version: int | None = None  # setData: the znode's new data version; check: as ZooKeeper logs it
    ephemeral_owner: int = 0  # create: the owning session when ephemeral, else 0
    data_len: int | None = None
    multi_index: int | None = None  # position in its multi; None when not part of one
    failed: bool = False  # a sub-operation of a multi that failed as a whole: nothing applied
    timeout_ms: int | None = None  # createSession
    deleted: tuple[str, ...] = ()  # closeSession: the ephemerals ZooKeeper deleted with it

    @property
    def applied(self) -> bool:
        return not self.failed and self.type not in ("error", "check", "other")


def _data_dir(source: _HasZk | Path | str) -> Path:
    if isinstance(source, (str, Path)):
        d = Path(source)
    else:
        d = Path(source.workdir) / "zk" / "data"
    return d / "version-2" if (d / "version-2").is_dir() else d


def dump_classes() -> Path:
    return compile_once(DUMP_SOURCE, ":".join(ZK_CLASSPATH), BK_HOME, "zk-txn-dump-1")


def read_txnlog(source: _HasZk | Path | str, from_zxid: int = 0, timeout: float = 120.0) -> list[TxnRecord]:
    """Every txn from `from_zxid` on, in zxid order, from a cluster's ZooKeeper (`source.workdir`/zk/data)
    or a data directory (with or without its `version-2`). Safe while the server runs: the live file's
    last, half-written record is left out."""
    log_dir = _data_dir(source)
    if not any(log_dir.glob("log.*")):
        return []
    cp = f"{dump_classes()}:{':'.join(j for j in ZK_CLASSPATH if Path(j).exists())}"
    argv = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=error"]
    argv += ["-cp", cp, "ZkTxnDump", str(log_dir), str(from_zxid)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0 or '"end":true' not in proc.stdout[-200:]:
        raise HarnessError(f"ZkTxnDump failed rc={proc.returncode}: {proc.stderr[-2000:]}")
    return parse_dump(proc.stdout.splitlines())


class TxnLog:
    """The log read incrementally: each `records()` reads only the txns after the last one it has (a
    long campaign's log is read once, not once per round) and returns every record so far."""

    def __init__(self, source: _HasZk | Path | str) -> None:
        self.source = source
        self._records: list[TxnRecord] = []

    def records(self) -> list[TxnRecord]:
        after = self._records[-1].zxid + 1 if self._records else 0
        self._records += read_txnlog(self.source, after)
        return list(self._records)


def parse_dump(lines: Iterable[str]) -> list[TxnRecord]:
    """ZkTxnDump's JSON lines -> records; every sub-operation of a multi that holds an error is `failed`
    (ZooKeeper applies a multi whole or not at all)."""
    raw = [json.loads(line) for line in lines if line.startswith('{"t"')]
    failed_zxids = {r["z"] for r in raw if "sub" in r and r.get("op") == "error"}
    out = []
    for r in raw:
        op = r.get("op", "other")
        eph = bool(r.get("eph")) and op == "create"
        out.append(
            TxnRecord(
                time=r["t"],
                session=r["s"],
                zxid=r["z"],
                cxid=r["cx"],
                type=op,
                path=r.get("path"),
                version=r.get("ver"),
                ephemeral_owner=r["s"] if eph else 0,
                data_len=r.get("len"),
                multi_index=r.get("sub"),
                failed="sub" in r and r["z"] in failed_zxids,
                timeout_ms=r.get("to"),
                deleted=tuple(r.get("paths", ())),
            )
        )
    return out


# ---------------------------------------------------------------- paths (parsed here, not by the auditor)

LedgerKey = tuple[int, int]  # (scope, ledger); scope 0 for every ordinary ledger
_LEGACY = re.compile(r"([0-9]{2})/([0-9]{4})/L([0-9]{4})")
_LONG = re.compile(r"([0-9]{3})/([0-9]{4})/([0-9]{4})/([0-9]{4})/L([0-9]{4})")
_FLAT = re.compile(r"L([0-9]{10}|[1-9][0-9]{10,18})")
_SCOPED = re.compile(
    r"scoped/" + "/".join(["([0-9]{3})", *["([0-9]{4})"] * 4, "([0-9]{3})", *["([0-9]{4})"] * 3]) + r"/L([0-9]{4})"
)
_LOCK = re.compile(r"underreplication/locks/urL([0-9]{10,19})")
_SCOPED_LOCK = re.compile(r"underreplication/scopedlocks/urL([0-9]{1,19})_([0-9]{10,19})")


def _rel(path: str | None, root: str) -> str | None:
    base = root.rstrip("/") + "/"
    return path[len(base) :] if path and path.startswith(base) else None


def ledger_of_path(path: str | None, root: str) -> LedgerKey | None:
    """The ledger whose metadata znode `path` is, in any ZooKeeper layout (legacy 2-4-4, long 3-4-4-4-4,
    flat, and the scoped extension), or None."""
    rel = _rel(path, root)
    if rel is None:
        return None
    m = _SCOPED.fullmatch(rel)
    if m:
        value = int("".join(m.groups()))
        return value // 10**19, value % 10**19
    for rx in (_LEGACY, _LONG, _FLAT):
        m = rx.fullmatch(rel)
        if m:
            return 0, int("".join(m.groups()))
    return None


def ledger_of_lock(path: str | None, root: str) -> LedgerKey | None:
    """The ledger a repair lock znode (`<root>/underreplication/locks/urL%010d`, or our scoped one) locks."""
    rel = _rel(path, root)
    if rel is None:
        return None
    m = _LOCK.fullmatch(rel)
    if m:
        return 0, int(m.group(1))
    m = _SCOPED_LOCK.fullmatch(rel)
    if m:
        return int(m.group(1)), int(m.group(2))
    return None


def list_ledgers(kazoo: Any, root: str) -> set[int]:
    """Every (scope 0) ledger in ZooKeeper now, by walking the digit directories under `root`."""
    out: set[int] = set()
    stack = [root.rstrip("/")]
    while stack:
        d = stack.pop()
        try:
            kids = kazoo.get_children(d or "/")
        except Exception:  # deleted under us (NoNodeError)
            continue
        for k in kids:
            p = f"{d}/{k}"
            key = ledger_of_path(p, root)
            if key is not None and key[0] == 0:
                out.add(key[1])
            elif k.isdigit() and len(k) in (2, 3, 4) and p.count("/") - root.rstrip("/").count("/") < 5:
                stack.append(p)
    return out


# ---------------------------------------------------------------- analysers


@dataclass(frozen=True, slots=True)
class SessionSpan:
    session: int
    created_ms: int | None  # None: created before the records start
    closed_ms: int | None  # None: still open at the end of the records
    timeout_ms: int | None
    created_zxid: int | None
    closed_zxid: int | None


def session_spans(records: Sequence[TxnRecord]) -> dict[int, SessionSpan]:
    """When each session seen was created and closed (or expired: the log does not tell them apart)."""
    spans: dict[int, dict[str, Any]] = {}
    for r in records:
        s = spans.setdefault(
            r.session,
            {"created_ms": None, "closed_ms": None, "timeout_ms": None, "created_zxid": None, "closed_zxid": None},
        )
        if r.type == "createSession":
            s.update(created_ms=r.time, timeout_ms=r.timeout_ms, created_zxid=r.zxid)
        elif r.type == "closeSession":
            s.update(closed_ms=r.time, closed_zxid=r.zxid)
    return {k: SessionSpan(k, **v) for k, v in spans.items()}


@dataclass(frozen=True, slots=True)
class LockInterval:
    """One holding of a ledger's repair lock: from the lock znode's create to its delete, or to its
    owner's closeSession. `end_*` None: still held when the records end."""

    scope: int
    ledger: int
    path: str
    session: int  # the creator (the ephemeral owner)
    start_ms: int
    start_pos: tuple[int, int]  # (zxid, sub-op index or -1): where in the log it began
    end_ms: int | None = None
    end_pos: tuple[int, int] | None = None
    ended_by: str | None = None  # "delete" | "closeSession"
    deleted_by: int | None = None  # the session that deleted it (ended_by "delete")


def _pos(r: TxnRecord) -> tuple[int, int]:
    return r.zxid, -1 if r.multi_index is None else r.multi_index


def lock_intervals(records: Sequence[TxnRecord], root: str) -> list[LockInterval]:
    """Every repair-lock holding in the records, in start order."""
    open_: dict[str, LockInterval] = {}
    by_session: dict[int, set[str]] = {}
    done: list[LockInterval] = []

    def end(path: str, r: TxnRecord, how: str) -> None:
        iv = open_.pop(path)
        by_session.get(iv.session, set()).discard(path)
        done.append(
            replace(iv, end_ms=r.time, end_pos=_pos(r), ended_by=how, deleted_by=r.session if how == "delete" else None)
        )

    for r in records:
        if not r.applied:
            continue
        if r.type == "closeSession":
            for path in sorted(by_session.pop(r.session, set())):
                if path in open_:
                    end(path, r, "closeSession")
            continue
        key = ledger_of_lock(r.path, root)
        if key is None or r.path is None:
            continue
        if r.type == "create":
            open_[r.path] = LockInterval(key[0], key[1], r.path, r.session, r.time, _pos(r))
            if r.ephemeral_owner:
                by_session.setdefault(r.session, set()).add(r.path)
        elif r.type == "delete" and r.path in open_:
            end(r.path, r, "delete")
    done.extend(open_.values())
    return sorted(done, key=lambda iv: iv.start_pos)


def _held(ivs: list[LockInterval], session: int, pos: tuple[int, int]) -> bool:
    return any(
        iv.session == session and iv.start_pos <= pos and (iv.end_pos is None or pos <= iv.end_pos) for iv in ivs
    )


def writer_sessions_of(records: Sequence[TxnRecord], root: str) -> dict[LedgerKey, set[int]]:
    """The sessions that created each ledger's metadata znode (its writer), any incarnation."""
    out: dict[LedgerKey, set[int]] = {}
    for r in records:
        if r.applied and r.type == "create":
            key = ledger_of_path(r.path, root)
            if key is not None:
                out.setdefault(key, set()).add(r.session)
    return out


def metadata_writes_without_lock(
    records: Sequence[TxnRecord], root: str, writer_sessions: dict[LedgerKey, set[int]] | None = None
) -> list[dict[str, Any]]:
    """Every applied setData/delete of a ledger's metadata znode by a session that is neither the writer
    of that incarnation of the ledger (the session whose create made the znode the write lands on; any
    `writer_sessions` given for the ledger count as writers too) nor, at that point of the log, the
    holder of that ledger's repair lock. A holder's write in the same multi as the lock's create or
    delete counts as held. A write to a ledger created before the records start has no known writer."""
    extra = writer_sessions or {}
    by_ledger: dict[LedgerKey, list[LockInterval]] = {}
    for iv in lock_intervals(records, root):
        by_ledger.setdefault((iv.scope, iv.ledger), []).append(iv)
    creator: dict[LedgerKey, int] = {}  # the current incarnation's writer
    out: list[dict[str, Any]] = []
    for r in records:
        if not r.applied or r.type not in ("create", "setData", "delete"):
            continue
        key = ledger_of_path(r.path, root)
        if key is None:
            continue
        if r.type == "create":
            creator[key] = r.session
            continue
        writer = creator.get(key)
        if r.type == "delete":
            creator.pop(key, None)
        if r.session == writer or r.session in extra.get(key, set()):
            continue
        if _held(by_ledger.get(key, []), r.session, _pos(r)):
            continue
        out.append(
            {
                "kind": "metadata_write_without_lock",
                "type": r.type,
                "path": r.path,
                "scope": key[0],
                "ledger": key[1],
                "session": r.session,
                "writer": writer,
                "zxid": r.zxid,
                "time": r.time,
                "version": r.version,
                "in_multi": r.multi_index is not None,
            }
        )
    return out


def recreated_ledgers(records: Sequence[TxnRecord], root: str) -> list[dict[str, Any]]:
    """Every create of a ledger's metadata znode after that ledger's znode was deleted in the records."""
    deleted: dict[LedgerKey, TxnRecord] = {}
    out: list[dict[str, Any]] = []
    for r in records:
        if not r.applied or r.type not in ("create", "delete"):
            continue
        key = ledger_of_path(r.path, root)
        if key is None:
            continue
        if r.type == "delete":
            deleted[key] = r
        elif key in deleted:
            d = deleted[key]
            out.append(
                {
                    "kind": "ledger_recreated",
                    "type": "create",
                    "path": r.path,
                    "scope": key[0],
                    "ledger": key[1],
                    "session": r.session,
                    "zxid": r.zxid,
                    "time": r.time,
                    "deleted_zxid": d.zxid,
                    "deleted_time": d.time,
                    "deleted_by": d.session,
                }
            )
    return out


class _RecoveryAdd(Protocol):
    @property
    def time(self) -> float: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def ledger(self) -> int: ...
    @property
    def entry(self) -> int: ...


def adds_without_lock(
    adds: Iterable[_RecoveryAdd],
    records: Sequence[TxnRecord],
    session_pid: dict[int, int],
    root: str,
    slack: float = END_SLACK_SECONDS,
) -> list[dict[str, Any]]:
    """Every RECOVERY_ADD (as the proxy recorded it: time in s, sender pid, ledger, entry) not inside a
    holding of that ledger's lock by a session of the sender's process: lock created at or before the
    add, ended no more than `slack` seconds before it (or still held). An add whose sender pid is unknown,
    or whose process has no known session, is a violation too: nothing shows it held a lock."""
    pid_sessions: dict[int, set[int]] = {}
    for s, p in session_pid.items():
        pid_sessions.setdefault(p, set()).add(s)
    by_ledger: dict[int, list[LockInterval]] = {}
    for iv in lock_intervals(records, root):
        if iv.scope == 0:
            by_ledger.setdefault(iv.ledger, []).append(iv)
    out: list[dict[str, Any]] = []
    for a in adds:
        sessions = pid_sessions.get(a.pid, set()) if a.pid is not None else set()
        ivs = [iv for iv in by_ledger.get(a.ledger, []) if iv.session in sessions]
        t_ms = a.time * 1000
        ok = any(iv.start_ms <= t_ms and (iv.end_ms is None or t_ms <= iv.end_ms + slack * 1000) for iv in ivs)
        if ok:
            continue
        reason = (
            "sender pid unknown"
            if a.pid is None
            else "no ZooKeeper session known for the sender"
            if not sessions
            else "no lock of the sender's sessions covers it"
        )
        out.append(
            {
                "kind": "recovery_add_without_lock",
                "time": a.time,
                "pid": a.pid,
                "ledger": a.ledger,
                "entry": a.entry,
                "reason": reason,
                "sender_sessions": sorted(sessions),
                "sender_locks": [(iv.start_ms, iv.end_ms) for iv in ivs],
            }
        )
    return out


# ---------------------------------------------------------------- session -> pid


_CONS_LINE = re.compile(r"/([0-9a-fA-F.:]+):([0-9]+)\[[0-9]+\]\(.*?sid=0x([0-9a-fA-F]+)")


def four_letter(port: int, word: str, host: str = "127.0.0.1", timeout: float = 2.0) -> str:
    """A ZooKeeper four-letter word's whole answer ('' when the server is down)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def parse_cons(text: str) -> list[tuple[str, int, int]]:
    """`cons` -> (client host, client port, session) for each connection that has a session."""
    return [(m.group(1), int(m.group(2)), int(m.group(3), 16)) for m in _CONS_LINE.finditer(text)]


@dataclass
class SessionSampler:
    """Samples ZooKeeper's `cons` every `interval` s and accumulates {session: pid} (never forgets one).
    `source`: a Cluster (its zk_port) or a port number. The server must whitelist `cons` (the harness's
    zoo.cfg does)."""

    source: Any
    interval: float = 0.5
    host: str = "127.0.0.1"
    _map: dict[int, int] = field(default_factory=dict)
    _known: dict[tuple[int, int], int | None] = field(default_factory=dict)  # (client port, session) -> pid
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    samples: int = 0
    failed_samples: int = 0  # answers that did not come (server down, cons not whitelisted)

    @property
    def port(self) -> int:
        return self.source if isinstance(self.source, int) else int(self.source.zk_port)

    def start(self) -> SessionSampler:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="zk-session-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sample()
            except Exception:  # an observer never takes the campaign down; the gap shows as unknown pids
                self.failed_samples += 1

    def sample(self) -> dict[int, int]:
        """One sample now; returns what it added."""
        text = four_letter(self.port, "cons", self.host)
        self.samples += 1
        conns = parse_cons(text)
        if not text:
            self.failed_samples += 1
        new = [(h, p, s) for h, p, s in conns if self._known.get((p, s)) is None]
        server = (self.host, self.port)
        pids = pids_of_peers([((h, p), server) for h, p, _ in new]) if new else {}
        added: dict[int, int] = {}
        with self._lock:
            for h, p, s in new:
                pid = pids.get(((h, p), server))
                self._known[(p, s)] = pid
                if pid is not None and s not in self._map:
                    self._map[s] = pid
                    added[s] = pid
        return added

    def snapshot(self) -> dict[int, int]:
        with self._lock:
            return dict(self._map)

    def wait_for(self, session: int, timeout: float = 5.0) -> int | None:
        """The pid of `session`, sampling until it is seen or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if session in self._map:
                    return self._map[session]
            if time.monotonic() > deadline:
                return None
            self.sample()
            time.sleep(0.1)
