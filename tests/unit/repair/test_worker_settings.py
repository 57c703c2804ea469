"""The repair worker's settings (the `repair` section, Java's keys), its bookie states, and
`bk-auditor repair`'s configuration errors (exit 2, one line) through the real console script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.checks.build import bookie_config
from auditor.durability.model import DigestType
from auditor.durability.repairplan import BookieState
from auditor.metadata.interfaces import BookieRegistration, NodeStat, Registrations
from auditor.repair.evidence import BookieStates
from auditor.repair.run import repair_options, repair_settings
from auditor.settings import load_settings

pytestmark = pytest.mark.usefixtures("no_bkaudit_env")

BIN = Path(sys.executable).with_name("bk-auditor")


def regs(writable: list[str], read_only: list[str] = []) -> Registrations:  # noqa: B006
    def one(b: str, ro: bool) -> BookieRegistration:
        return BookieRegistration(b, ro, None, NodeStat(0))

    return Registrations({b: one(b, False) for b in writable}, {b: one(b, True) for b in read_only})


def test_java_recovery_keys_map_to_the_repair_section(tmp_path: Path) -> None:
    conf = tmp_path / "bk_server.conf"
    conf.write_text(
        "metadataServiceUri=zk+hierarchical://h:2181/ledgers\nbookieRecoveryPasswd=s3cret\n"
        "bookieRecoveryDigestType=mac\nlockReleaseOfFailedLedgerGracePeriod=60000\n"
    )
    s = load_settings(conf)
    assert (s.repair.recovery_password, s.repair.recovery_digest_type, s.repair.backoff_cap_seconds) == (
        "s3cret",
        "MAC",
        60.0,
    )
    assert "s3cret" not in repr(s.repair)  # never printed
    o = repair_options(s)
    assert (o.recovery_password, o.recovery_digest, o.backoff.delay_s(1)) == (b"s3cret", DigestType.HMAC, 60 / 32)
    assert not o.best_effort_placement and o.copy_limits.max_in_flight == 8 and o.bytes_per_second == 0


def test_repair_defaults_are_javas() -> None:
    s = load_settings(None)
    o = repair_options(s)
    assert (o.recovery_password, o.recovery_digest, o.backoff.cap_s) == (b"", DigestType.CRC32, 300.0)


def test_bookie_states_apply_the_delay_only_to_bookies_seen_leaving() -> None:
    states = BookieStates(recovery_delay_s=60)
    states.update(regs(["a:1", "b:1"], ["c:1"]), now_ms=1_000)
    assert [states.state(b, 1_000) for b in ("a:1", "c:1", "z:1")] == [
        BookieState.WRITABLE,
        BookieState.READ_ONLY,
        BookieState.GONE,  # unregistered before the worker started: the auditor waited already
    ]
    states.update(regs(["a:1"], ["c:1"]), now_ms=2_000)  # b leaves while the worker runs
    assert states.state("b:1", 2_000 + 59_999) is BookieState.ABSENT
    assert states.state("b:1", 2_000 + 60_000) is BookieState.GONE
    states.update(regs(["a:1", "b:1"]), now_ms=3_000)  # back: writable, and its clock is reset
    assert states.state("b:1", 3_000) is BookieState.WRITABLE and states.writable == ["a:1", "b:1"]


@pytest.mark.parametrize(
    "text, words",
    [
        ("repair:\n  recovery_digest_type: SHA1\n", "repair.recovery_digest_type"),
        ("repair:\n  entries_in_flight: 0\n", "repair.entries_in_flight"),
        ("repair:\n  best_effort: true\n", "repair.best_effort"),
    ],
)
def test_bad_repair_settings_exit_2_with_one_line(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "auditor.yaml"
    path.write_text("metadata_service_uri: zk+hierarchical://127.0.0.1:1/ledgers\n" + text)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    r = subprocess.run(
        [str(BIN), "repair", "--once", "--config", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1 and words in lines[0], (r.returncode, r.stderr[-2000:])


def test_unreachable_zookeeper_is_one_line_and_exit_2() -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("BKAUDIT_")}
    r = subprocess.run(
        [str(BIN), "repair", "--once", "--metadata-service-uri", "zk+hierarchical://127.0.0.1:1/ledgers"],
        capture_output=True,
        text=True,
        env={**env, "BKAUDIT_ZOOKEEPER__CONNECT_TIMEOUT_SECONDS": "1"},
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.returncode == 2 and errors == [
        "error: cannot reach ZooKeeper at 127.0.0.1:1 within 1s (zookeeper.connect_timeout_seconds)"
    ], r.stderr[-2000:]


def test_the_repair_role_paces_bookies_with_its_own_budget(tmp_path: Path) -> None:
    """The auditor's per-bookie request rate (adaptive, from 200/s up to a 1,000/s cap by default) does not
    throttle the repair role: it has `repair.requests_per_second`, unlimited by default as Java's
    ReplicationWorker, and fixed when set."""
    conf = tmp_path / "c.yaml"
    conf.write_text("metadata_service_uri: zk+hierarchical://h:2181/ledgers\n")
    s = load_settings(conf)
    assert bookie_config(s).rate_limit == 1000.0
    assert bookie_config(s).adaptive is not None and bookie_config(s).adaptive.start == 200.0  # type: ignore[union-attr]
    assert bookie_config(repair_settings(s)).rate_limit is None
    conf.write_text("metadata_service_uri: zk+hierarchical://h:2181/ledgers\nrepair:\n  requests_per_second: 200\n")
    paced = repair_settings(load_settings(conf))
    assert (
        bookie_config(paced).rate_limit == 200.0 and paced.bookie_client.max_in_flight == s.bookie_client.max_in_flight
    )
    assert bookie_config(paced).adaptive is None
