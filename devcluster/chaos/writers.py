"""Live writers for the repair chaos campaign: JVMs of ChaosWriter (devcluster/java/ChaosWriter.java) on the
real Java client, each with writer threads that create ledgers of the three quorum shapes, write at a rate,
react to bookie failures with ensemble changes, close, roll over and trim as Pulsar does, and log every
acknowledged entry (ledger, entry, CRC32 of the payload, length) to an ack log of their own.

Why: the campaign's first invariant (no acknowledged entry lost or changed) needs ground truth that does
not come from our code. The ack logs are that truth (a line is written, one write(2), only after the Java
client acknowledged the entry, so a SIGKILLed writer loses no logged line), and `verify` reads every logged
entry back with the Java client, without recovery (it never fences, closes or writes).

    fleet = WriterFleet(cluster, workdir, processes=2, writers=3, rate=20, seed=7)
    fleet.start()
    open_ones = fleet.kill(0)        # SIGKILL: its open ledgers stay open
    fleet.restart(0)                 # a new JVM, new seed, new ack log
    rows = fleet.verify()            # one dict per ledger (see ChaosWriter's javadoc)
    fleet.stop_all()                 # SIGTERM: open ledgers closed, exit 0
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devcluster.cluster import Cluster, HarnessError
from devcluster.cluster.javatools import JVM_CLIENT, JVM_COMMON, classpath, writer_classes
from devcluster.cluster.processes import Proc, tail


@dataclass
class AckedLedger:
    """What the ack logs say about one ledger."""

    ledger_id: int
    process: int  # the writer slot (0..processes-1) whose JVM created it
    log: Path
    shape: str | None = None
    created_ms: int | None = None
    entries: dict[int, tuple[str, int]] = field(default_factory=dict)  # entry -> (crc32 hex, length)
    closed_last: int | None = None  # lastEntryId the writer's close reported; None: never closed by it
    closed_ms: int | None = None
    ensembles: int | None = None  # segments in the metadata the writer closed (> 1: ensemble changes)
    deleted_ms: int | None = None  # the writer trimmed it
    errors: list[str] = field(default_factory=list)

    @property
    def max_acked(self) -> int:
        return max(self.entries) if self.entries else -1

    @property
    def deleted(self) -> bool:
        return self.deleted_ms is not None

    @property
    def open(self) -> bool:
        """Left open by its writer (neither closed nor deleted: a killed JVM's ledger)."""
        return self.closed_last is None and self.deleted_ms is None


def parse_ack_log(path: Path, process: int, into: dict[int, AckedLedger] | None = None) -> dict[int, AckedLedger]:
    """Parse one ack log (a torn last line of a killed writer is skipped)."""
    out: dict[int, AckedLedger] = {} if into is None else into
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        lid = ev.get("l")
        if not isinstance(lid, int) or lid < 0:
            continue
        rec = out.get(lid)
        if rec is None:
            rec = out[lid] = AckedLedger(lid, process, path)
        kind = ev.get("ev")
        if kind == "ack":
            rec.entries[int(ev["e"])] = (str(ev["h"]), int(ev["n"]))
        elif kind == "create":
            rec.shape, rec.created_ms = ev.get("shape"), ev.get("t")
        elif kind == "close":
            rec.closed_last, rec.closed_ms, rec.ensembles = int(ev["last"]), ev.get("t"), ev.get("ens")
        elif kind == "delete":
            rec.deleted_ms = ev.get("t")
        elif kind == "error":
            rec.errors.append(str(ev.get("msg", ""))[:200])
    return out


@dataclass
class _Slot:
    index: int
    generation: int = 0
    proc: Proc | None = None
    logs: list[Path] = field(default_factory=list)  # every incarnation's ack log, oldest first


class WriterFleet:
    """`processes` ChaosWriter JVMs x `writers` threads each, on `cluster`; ack logs under `workdir`."""

    def __init__(
        self,
        cluster: Cluster,
        workdir: Path,
        processes: int = 2,
        writers: int = 3,
        rate: float = 20.0,
        seed: int = 1,
        shapes: Sequence[str] = ("3/2/2", "3/3/2", "5/2/2"),
        entry_size: tuple[int, int] = (512, 4096),
        entries: tuple[int, int] = (200, 800),
        retain: int = 3,
        password: str = "pw",
        digest: str = "CRC32C",
        outstanding: int = 4,
        add_timeout: int = 3,
    ) -> None:
        self.c = cluster
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.processes, self.writers, self.rate, self.seed = processes, writers, rate, seed
        self.shapes, self.entry_size, self.entries, self.retain = list(shapes), entry_size, entries, retain
        self.password, self.digest, self.outstanding, self.add_timeout = password, digest, outstanding, add_timeout
        self.slots = [_Slot(i) for i in range(processes)]
        self._pids: list[int] = []
        self.last_summary: dict[str, Any] = {}
        self.tamper_detail: dict[str, Any] = {}
        self._classes = writer_classes()

    # ------------------------------------------------------------------ processes
    def _java(self, command: str, args: Iterable[str]) -> list[str]:
        c = self.c
        return [
            "java",
            *JVM_COMMON,
            *JVM_CLIENT,
            *c._client_jvm(),
            f"-Dlog4j.configurationFile={c.conf_dir / 'log4j2-shell.xml'}",
            "-cp",
            f"{self._classes}:{classpath()}",
            "ChaosWriter",
            command,
            "--metadata-uri",
            c.metadata_service_uri,
            *(["--client-conf", str(c.conf_dir / "client.conf")] if c.client_conf else []),
            *args,
        ]

    def _seed_of(self, slot: _Slot) -> int:
        return self.seed * 1_000_003 + slot.index * 1009 + slot.generation

    def _launch(self, slot: _Slot) -> None:
        log = self.workdir / f"w{slot.index}-g{slot.generation}.ack.jsonl"
        args = [
            "--writers",
            str(self.writers),
            "--ack-log",
            str(log),
            "--seed",
            str(self._seed_of(slot)),
            "--shapes",
            ",".join(self.shapes),
            "--entry-size-min",
            str(self.entry_size[0]),
            "--entry-size-max",
            str(self.entry_size[1]),
            "--entries-min",
            str(self.entries[0]),
            "--entries-max",
            str(self.entries[1]),
            "--rate",
            str(self.rate),
            "--retain",
            str(self.retain),
            "--password",
            self.password,
            "--digest",
            self.digest,
            "--outstanding",
            str(self.outstanding),
            "--add-timeout",
            str(self.add_timeout),
        ]
        proc = Proc(f"chaos-writer-{slot.index}", self._java("stream", args), log.with_suffix(".log"))
        proc.start()
        assert proc.pid is not None
        self._pids.append(proc.pid)
        slot.proc, slot.logs = proc, [*slot.logs, log]

    def start(self) -> WriterFleet:
        """Start every JVM that is not running."""
        for slot in self.slots:
            if slot.proc is None or not slot.proc.running:
                self._launch(slot)
        return self

    def running(self, i: int) -> bool:
        p = self.slots[i].proc
        return p is not None and p.running

    def pid(self, i: int) -> int | None:
        p = self.slots[i].proc
        return p.pid if p is not None and p.running else None

    def pids_ever(self) -> list[int]:
        """Every writer JVM's pid this fleet started (killed and restarted ones too)."""
        return list(self._pids)

    def open_ledgers(self, i: int) -> list[int]:
        """Ledgers the current incarnation of JVM `i` created and neither closed nor deleted."""
        slot = self.slots[i]
        if not slot.logs:
            return []
        return sorted(lid for lid, rec in parse_ack_log(slot.logs[-1], i).items() if rec.open)

    def kill(self, i: int) -> list[int]:
        """SIGKILL JVM `i` (by pid); returns the ledgers it left open (from its ack log)."""
        slot = self.slots[i]
        if slot.proc is not None:
            slot.proc.kill()
        return self.open_ledgers(i)

    def restart(self, i: int) -> None:
        """Start JVM `i` again (killing it first if it runs): a new incarnation, new seed, new ack log."""
        slot = self.slots[i]
        if slot.proc is not None and slot.proc.running:
            slot.proc.kill()
        slot.generation += 1
        self._launch(slot)

    def stop_all(self, timeout: float = 40.0) -> dict[int, int | None]:
        """SIGTERM every JVM (they close their open ledgers and exit 0), wait; returns slot -> exit code."""
        for slot in self.slots:
            if slot.proc is not None and slot.proc.running:
                slot.proc.signal(15)
        codes: dict[int, int | None] = {}
        for slot in self.slots:
            if slot.proc is None or slot.proc.popen is None:
                continue
            try:
                codes[slot.index] = slot.proc.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                slot.proc.kill()
                codes[slot.index] = None
        return codes

    # ------------------------------------------------------------------ ground truth
    def ack_logs(self) -> list[Path]:
        return [log for slot in self.slots for log in slot.logs if log.exists()]

    def acked(self) -> dict[int, AckedLedger]:
        """Every ledger of every ack log: its acknowledged entries and its create/close/delete events."""
        out: dict[int, AckedLedger] = {}
        for slot in self.slots:
            for log in slot.logs:
                parse_ack_log(log, slot.index, out)
        return out

    def written_total(self) -> int:
        """Entries acknowledged to the writers so far (all logs)."""
        return sum(len(rec.entries) for rec in self.acked().values())

    def verify(self, logs: Sequence[Path] | None = None, timeout: float = 900.0) -> list[dict[str, Any]]:
        """The Java `verify` over `logs` (default: every ack log): one row per ledger; the summary line goes
        to `last_summary`. HarnessError when the verifier itself failed."""
        logs = list(logs) if logs is not None else self.ack_logs()
        if not logs:
            return []
        argv = self._java("verify", ["--ack-log", ",".join(str(p) for p in logs), "--password", self.password])
        argv += ["--digest", self.digest]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        with open(self.workdir / "verify.log", "a") as log:
            log.write(
                f"=== verify {len(logs)} logs rc={proc.returncode}\n{proc.stdout[-20000:]}\n{proc.stderr[-5000:]}\n"
            )
        rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        summary = [r for r in rows if r.get("summary")]
        if proc.returncode != 0 or not summary:
            raise HarnessError(
                f"ChaosWriter verify failed rc={proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
            )
        self.last_summary = summary[-1]
        return [r for r in rows if not r.get("summary")]

    def tampered_entry_flagged(self) -> bool:
        """The verifier can fail: an ack log naming a real acknowledged entry with a wrong hash must be
        reported as changed (nothing on the bookies is touched). Details in `tamper_detail`."""
        candidates = sorted(
            (rec for rec in self.acked().values() if rec.entries and not rec.deleted),
            key=lambda r: (r.closed_last is None, -(r.closed_ms or 0)),
        )
        for rec in candidates[:5]:
            entry = min(rec.entries)
            good, length = rec.entries[entry]
            bad = f"{(int(good, 16) ^ 0x1):08x}"
            path = self.workdir / f"tamper-{rec.ledger_id}.jsonl"
            path.write_text(
                json.dumps({"ev": "create", "l": rec.ledger_id, "shape": rec.shape, "t": 0})
                + "\n"
                + json.dumps({"ev": "ack", "l": rec.ledger_id, "e": entry, "h": bad, "n": length})
                + "\n"
            )
            rows = self.verify([path])
            row = next((r for r in rows if r.get("ledgerId") == rec.ledger_id), None)
            if row is None or row.get("state") == "GONE":
                continue  # trimmed meanwhile: try another
            self.tamper_detail = {"ledger": rec.ledger_id, "entry": entry, "row": row}
            return entry in row.get("changed", []) and row.get("verified") == 0
        raise HarnessError(f"no existing acknowledged entry to tamper with ({len(candidates)} candidates)")

    def log_tail(self, i: int) -> str:
        p = self.slots[i].proc
        return tail(p.log) if p is not None else ""

    def wait_acked(self, count: int, timeout: float = 60.0) -> int:
        """Wait until the logs hold at least `count` acknowledged entries; returns how many they hold."""
        deadline = time.monotonic() + timeout
        n = self.written_total()
        while n < count and time.monotonic() < deadline:
            time.sleep(0.5)
            n = self.written_total()
        return n
