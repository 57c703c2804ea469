"""The admin API over a real grpc.aio server on 127.0.0.1 (ephemeral port), with the real FindingStore,
TaskBoard and PauseControl behind StateBackend, called through the generated client stubs."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from auditor._proto import admin_pb2 as pb
from auditor._proto import admin_pb2_grpc as pb_grpc
from auditor.admin.client import AdminClient, AdminClientError, StandbyReplyError
from auditor.admin.errors import LedgerNotFoundError
from auditor.admin.models import BookieCopies, LedgerExplanation, SegmentCopies
from auditor.admin.server import SERVICE_NAME, AdminServer
from auditor.board.tasks import TaskState
from auditor.daemon.backend import StateBackend
from auditor.daemon.state import DaemonState
from auditor.durability.findings import Category, Finding
from auditor.durability.ids import LedgerId
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.durability.ranges import RangeSet

BIG = LedgerId(5, 2**40 + 3)  # a scoped (128-bit) ledger


def metadata(ledger: LedgerId) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=ledger,
        ensemble_size=3,
        write_quorum=2,
        ack_quorum=2,
        state=LedgerState.CLOSED,
        last_entry_id=9,
        length=640,
        digest_type=DigestType.CRC32C,
        ctime=1_700_000_000_000,
        version=4,
        segments=(
            Segment(0, ("127.0.0.1:3181", "127.0.0.2:3182", "127.0.0.3:3183")),
            Segment(5, ("127.0.0.1:3181", "127.0.0.2:3182", "127.0.0.4:3184")),
        ),
        custom_metadata={"application": b"pulsar", "bin": b"\xff\x00"},
    )


@dataclass
class FakeCluster:
    """The daemon's side of the API: what `trigger` and `explain` would do, with recorded calls."""

    known: set[LedgerId] = field(default_factory=lambda: {LedgerId.of(7), BIG})
    triggered: list[str] = field(default_factory=list)
    explained: list[LedgerId] = field(default_factory=list)

    async def trigger(self, check: str) -> bool:
        self.triggered.append(check)
        return check != "ledger_check"  # pretend ledger_check is already running

    async def explain(self, ledger: LedgerId) -> LedgerExplanation:
        self.explained.append(ledger)
        if ledger not in self.known:
            raise LedgerNotFoundError(f"ledger {ledger} does not exist")
        seg0 = SegmentCopies(
            0,
            0,
            4,
            ("127.0.0.1:3181", "127.0.0.2:3182", "127.0.0.3:3183"),
            [
                BookieCopies("127.0.0.1:3181", 0, "ok", expected_entries=4, present_entries=4),
                BookieCopies(
                    "127.0.0.2:3182", 1, "missing", expected_entries=3, present_entries=1, missing=RangeSet.of([(1, 2)])
                ),
                BookieCopies("127.0.0.3:3183", 2, "unreachable", expected_entries=3, error="timeout", registered=False),
            ],
            min_copies=1,
        )
        seg1 = SegmentCopies(
            1,
            5,
            9,
            ("127.0.0.1:3181", "127.0.0.2:3182", "127.0.0.4:3184"),
            [
                BookieCopies(
                    "127.0.0.4:3184", 2, "missing", expected_entries=3, present_entries=0, missing=[(5, 5), (7, 8)]
                )
            ],
        )
        return LedgerExplanation(
            metadata(ledger),
            [seg0, seg1],
            under_replicated=True,
            notes=["bookie 127.0.0.3:3183 did not answer; re-check queued"],
        )


@dataclass
class Env:
    state: DaemonState
    cluster: FakeCluster
    server: AdminServer
    target: str
    channel: aio.Channel
    stub: pb_grpc.AdminServiceStub
    health: health_pb2_grpc.HealthStub


def finding(category: Category, ledger: LedgerId, bookie: str | None, segment: int = 0) -> Finding:
    return Finding.of(
        category,
        f"{category.value} on {ledger}",
        ledger=ledger,
        bookie=bookie,
        segment_index=segment,
        ensemble=("127.0.0.1:3181", "127.0.0.2:3182", "127.0.0.3:3183"),
        confirmed=True,
    )


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    state = DaemonState("pod-0", recheck_depth=lambda: 2)
    state.tasks.register("bookie_check", interval_seconds=86400)
    state.tasks.register("ledger_check", interval_seconds=604800)
    state.tasks.register("scrutiny", interval_seconds=86400)
    state.tasks.register("open_ledger_check", enabled=False)
    state.findings.add(finding(Category.ENTRY_NO_REPLICA, LedgerId.of(7), "127.0.0.2:3182"), check="scrutiny")
    state.findings.add(finding(Category.ENTRY_BELOW_WRITE_QUORUM, LedgerId.of(8), "127.0.0.1:3181"), check="scrutiny")
    state.findings.add(finding(Category.ENTRY_BELOW_WRITE_QUORUM, BIG, "127.0.0.4:3184"), check="scrutiny")
    cluster = FakeCluster()
    server = AdminServer(StateBackend(state, trigger=cluster.trigger, explain=cluster.explain), "127.0.0.1:0")
    port = await server.start()
    server.follow_leadership(state.leadership)
    target = f"127.0.0.1:{port}"
    channel = aio.insecure_channel(target)
    try:
        yield Env(
            state,
            cluster,
            server,
            target,
            channel,
            pb_grpc.AdminServiceStub(channel),
            health_pb2_grpc.HealthStub(channel),
        )
    finally:
        await channel.close()
        await server.stop(0)


async def health_of(env: Env, service: str) -> str:
    resp = await env.health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)


async def wait_health(env: Env, service: str, want: str) -> None:
    for _ in range(100):
        if await health_of(env, service) == want:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{service!r} never became {want}")


# ------------------------------------------------------------------------------------------ status


async def test_status_reports_state(env: Env) -> None:
    env.state.leadership.set(False, leader="pod-1")
    board = env.state.tasks
    board.start("scrutiny", total=100, cursor="L0")
    board.progress("scrutiny", 25, cursor="L25")
    resp = await env.stub.Status(pb.StatusRequest(), timeout=5)
    assert (resp.identity, resp.leader, resp.leader_identity) == ("pod-0", False, "pod-1")
    assert not resp.paused and resp.recheck_queue_depth == 2
    assert dict(resp.finding_counts) == {"entry_no_replica": 1, "entry_below_write_quorum": 2}
    tasks = {t.name: t for t in resp.tasks}
    assert list(tasks) == ["bookie_check", "ledger_check", "scrutiny", "open_ledger_check"]
    s = tasks["scrutiny"]
    assert (s.state, s.done, s.total, s.cursor, s.runs) == ("running", 25, 100, "L25", 1)
    assert s.HasField("last_start") and not s.HasField("last_success")
    assert s.HasField("eta_seconds") and s.eta_seconds >= 0
    assert tasks["open_ledger_check"].state == "disabled"
    assert tasks["bookie_check"].interval_seconds == 86400
    assert not tasks["bookie_check"].HasField("total")


# ------------------------------------------------------------------------------------------ trigger


async def test_trigger_only_on_the_leader(env: Env) -> None:
    env.state.leadership.set(False, leader="pod-1")
    with pytest.raises(aio.AioRpcError) as exc:
        await env.stub.TriggerCheck(pb.TriggerCheckRequest(check="scrutiny"), timeout=5)
    assert exc.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "standby" in exc.value.details() and "pod-1" in exc.value.details()
    assert env.cluster.triggered == []

    env.state.leadership.set(True)
    resp = await env.stub.TriggerCheck(pb.TriggerCheckRequest(check="scrutiny"), timeout=5)
    assert resp.accepted and "scrutiny" in resp.message
    busy = await env.stub.TriggerCheck(pb.TriggerCheckRequest(check="ledger_check"), timeout=5)
    assert not busy.accepted and "already running" in busy.message
    assert env.cluster.triggered == ["scrutiny", "ledger_check"]

    with pytest.raises(aio.AioRpcError) as exc:
        await env.stub.TriggerCheck(pb.TriggerCheckRequest(check="nope"), timeout=5)
    assert exc.value.code() is grpc.StatusCode.NOT_FOUND and "scrutiny" in exc.value.details()
    with pytest.raises(aio.AioRpcError) as exc:
        await env.stub.TriggerCheck(pb.TriggerCheckRequest(check=""), timeout=5)
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT


# ------------------------------------------------------------------------------------------ findings


async def test_list_findings_filters(env: Env) -> None:
    resp = await env.stub.ListFindings(pb.ListFindingsRequest(), timeout=5)
    assert resp.total_matching == 3
    assert [f.severity for f in resp.findings] == ["critical", "minor", "minor"]  # most severe first
    first = resp.findings[0]
    assert (first.category, first.ledger_id, first.bookie_id, first.check, first.times_seen, first.confirmed) == (
        "entry_no_replica",
        "7",
        "127.0.0.2:3182",
        "scrutiny",
        1,
        True,
    )
    fields = json.loads(first.fields_json)
    assert fields["ledgerId"] == 7 and fields["bookieId"] == "127.0.0.2:3182" and fields["segmentIndex"] == 0
    assert json.loads(first.dedup_key)[0] == "entry_no_replica"

    by_cat = await env.stub.ListFindings(pb.ListFindingsRequest(category="entry_below_write_quorum"), timeout=5)
    assert {f.ledger_id for f in by_cat.findings} == {"8", BIG.qualified_name}
    for text in (BIG.qualified_name, f"{BIG.scope}:{BIG.ledger}"):
        one = await env.stub.ListFindings(pb.ListFindingsRequest(ledger=text), timeout=5)
        assert [f.qualified_name for f in one.findings] == [BIG.qualified_name]
    by_bookie = await env.stub.ListFindings(pb.ListFindingsRequest(bookie="127.0.0.4:3184"), timeout=5)
    assert [f.ledger_id for f in by_bookie.findings] == [BIG.qualified_name]
    limited = await env.stub.ListFindings(pb.ListFindingsRequest(limit=1), timeout=5)
    assert len(limited.findings) == 1 and limited.total_matching == 3

    with pytest.raises(aio.AioRpcError) as exc:
        await env.stub.ListFindings(pb.ListFindingsRequest(ledger="not-a-ledger"), timeout=5)
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT and "cannot parse ledger id" in exc.value.details()


async def test_resolved_findings_only_on_request(env: Env) -> None:
    rec = env.state.findings.query(ledger=LedgerId.of(8))[0]
    env.state.findings.resolve(rec.key)
    active = await env.stub.ListFindings(pb.ListFindingsRequest(), timeout=5)
    assert {f.ledger_id for f in active.findings} == {"7", BIG.qualified_name}
    everything = await env.stub.ListFindings(pb.ListFindingsRequest(include_resolved=True), timeout=5)
    resolved = [f for f in everything.findings if f.HasField("resolved_at")]
    assert [f.ledger_id for f in resolved] == ["8"]


# ------------------------------------------------------------------------------------------ explain


async def test_explain_ledger_by_decimal_and_qualified_name(env: Env) -> None:
    resp = await env.stub.ExplainLedger(pb.ExplainLedgerRequest(ledger="7"), timeout=5)
    m = resp.metadata
    assert (m.ledger_id, m.state, m.ensemble_size, m.write_quorum, m.ack_quorum, m.last_entry_id) == (
        "7",
        "CLOSED",
        3,
        2,
        2,
        9,
    )
    assert (m.digest_type, m.ctime, m.metadata_version, m.length) == ("CRC32C", 1_700_000_000_000, 4, 640)
    assert dict(m.custom_metadata) == {"application": "pulsar", "bin": "hex:ff00"}
    assert resp.under_replicated and list(resp.notes) == ["bookie 127.0.0.3:3183 did not answer; re-check queued"]
    assert [s.index for s in resp.segments] == [0, 1]
    s0 = resp.segments[0]
    assert list(s0.ensemble) == ["127.0.0.1:3181", "127.0.0.2:3182", "127.0.0.3:3183"] and s0.min_copies == 1
    b = {x.bookie_id: x for x in s0.bookies}
    assert b["127.0.0.1:3181"].status == "ok" and b["127.0.0.1:3181"].present_entries == 4
    assert [(r.first, r.last) for r in b["127.0.0.2:3182"].missing] == [(1, 2)]
    assert not b["127.0.0.3:3183"].HasField("present_entries") and not b["127.0.0.3:3183"].registered
    assert b["127.0.0.3:3183"].error == "timeout"
    assert [(r.first, r.last) for r in resp.segments[1].bookies[0].missing] == [(5, 5), (7, 8)]
    assert not resp.segments[1].HasField("min_copies")
    assert [f.category for f in resp.findings] == ["entry_no_replica"]  # the store's findings for ledger 7

    big = await env.stub.ExplainLedger(pb.ExplainLedgerRequest(ledger=BIG.qualified_name), timeout=5)
    assert big.metadata.qualified_name == BIG.qualified_name and big.metadata.ledger_id == BIG.qualified_name
    assert [f.category for f in big.findings] == ["entry_below_write_quorum"]
    assert env.cluster.explained == [LedgerId.of(7), BIG]


async def test_explain_errors(env: Env) -> None:
    with pytest.raises(aio.AioRpcError) as exc:
        await env.stub.ExplainLedger(pb.ExplainLedgerRequest(ledger="123"), timeout=5)
    assert exc.value.code() is grpc.StatusCode.NOT_FOUND and "does not exist" in exc.value.details()
    with pytest.raises(aio.AioRpcError) as exc:
        await env.stub.ExplainLedger(pb.ExplainLedgerRequest(ledger="99999999999999999999999"), timeout=5)
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert env.cluster.explained == [LedgerId.of(123)]


@pytest.mark.parametrize("ledger", ["9" * 5000, "1:" + "9" * 5000, "9" * 30, "\u0661\u0662", "7\n\n7"])
async def test_hostile_ledger_ids_are_invalid_argument(env: Env, ledger: str) -> None:
    """Never INTERNAL: int() refuses > 4300 digits with a plain ValueError, which once escaped as INTERNAL."""
    for call in (
        lambda: env.stub.ExplainLedger(pb.ExplainLedgerRequest(ledger=ledger), timeout=5),
        lambda: env.stub.ListFindings(pb.ListFindingsRequest(ledger=ledger), timeout=5),
    ):
        with pytest.raises(aio.AioRpcError) as exc:
            await call()
        assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT, exc.value.details()
        assert len(exc.value.details()) < 200
    assert env.cluster.explained == []


async def test_huge_unknown_check_name_is_not_found_not_resource_exhausted(env: Env) -> None:
    """Found by the fuzz campaign: the whole name in the details overflowed gRPC's 16 KiB trailer."""
    with pytest.raises(aio.AioRpcError) as exc:
        await env.stub.TriggerCheck(pb.TriggerCheckRequest(check="x" * 100_000), timeout=5)
    assert exc.value.code() is grpc.StatusCode.NOT_FOUND and "unknown check 'xxxx" in exc.value.details()
    assert len(exc.value.details()) < 300


# ------------------------------------------------------------------------------------------ pause


async def test_pause_and_resume(env: Env) -> None:
    env.state.tasks.start("scrutiny", total=10)
    waiter_done = asyncio.Event()

    async def worker() -> None:  # what a check does between ledgers
        await asyncio.sleep(0)
        await env.state.pause.wait_resumed()
        waiter_done.set()

    resp = await env.stub.Pause(pb.PauseRequest(reason="bookie maintenance"), timeout=5)
    assert resp.changed
    task = asyncio.create_task(worker())
    again = await env.stub.Pause(pb.PauseRequest(reason="still maintenance"), timeout=5)
    assert not again.changed
    status = await env.stub.Status(pb.StatusRequest(), timeout=5)
    assert status.paused and status.pause_reason == "still maintenance" and status.HasField("paused_since")
    assert {t.name: t.state for t in status.tasks}["scrutiny"] == "paused"
    await asyncio.sleep(0.05)
    assert not waiter_done.is_set()

    assert (await env.stub.Resume(pb.ResumeRequest(), timeout=5)).changed
    await asyncio.wait_for(task, 5)
    assert waiter_done.is_set()
    status = await env.stub.Status(pb.StatusRequest(), timeout=5)
    assert not status.paused and {t.name: t.state for t in status.tasks}["scrutiny"] == "running"
    assert env.state.tasks.get("open_ledger_check").state is TaskState.DISABLED
    assert not (await env.stub.Resume(pb.ResumeRequest(), timeout=5)).changed


# ------------------------------------------------------------------------------------------ health


async def test_health_services(env: Env) -> None:
    assert await health_of(env, "liveness") == "SERVING"
    assert await health_of(env, "readiness") == "NOT_SERVING"  # until the daemon says it is ready
    assert await health_of(env, "") == "NOT_SERVING"
    assert await health_of(env, "leader") == "NOT_SERVING"  # standby
    assert await health_of(env, SERVICE_NAME) == "SERVING"
    with pytest.raises(aio.AioRpcError) as exc:
        await health_of(env, "nope")
    assert exc.value.code() is grpc.StatusCode.NOT_FOUND

    await env.server.set_health(ready=True)
    assert await health_of(env, "readiness") == "SERVING" and await health_of(env, "") == "SERVING"

    env.state.leadership.set(True)  # the listener flips the leader service
    await wait_health(env, "leader", "SERVING")
    env.state.leadership.set(False, leader="pod-1")
    await wait_health(env, "leader", "NOT_SERVING")
    env.state.leadership.set(True)
    await wait_health(env, "leader", "SERVING")

    # a Watch stream opened before shutdown sees every service go NOT_SERVING
    watch = env.health.Watch(health_pb2.HealthCheckRequest(service="leader"))
    first = await watch.read()
    assert first.status == health_pb2.HealthCheckResponse.SERVING
    stopping = asyncio.create_task(env.server.stop(grace=2))
    second = await asyncio.wait_for(watch.read(), 5)
    assert second.status == health_pb2.HealthCheckResponse.NOT_SERVING
    watch.cancel()
    await stopping


async def test_a_leader_whose_loop_was_frozen_claims_nothing_until_confirmed(env: Env) -> None:
    """After a stall longer than the limit (e.g. SIGSTOP past the session timeout), status, the `leader`
    health and trigger deny leadership at once, before the watchdog has even run; a confirmation by
    ZooKeeper (Leadership.confirm) restores it."""
    lead = env.state.leadership
    now = [100.0]
    lead._monotonic = lambda: now[0]
    lead.stall_limit = 1.0
    lead.beat()
    lead.set(True, vote_path="/ledgers/bk-auditor/election/V_0000000007")
    await wait_health(env, "leader", "SERVING")
    resp = await env.stub.Status(pb.StatusRequest(), timeout=5)
    assert (resp.leader, resp.leadership, resp.vote_path) == (
        True,
        "leader",
        "/ledgers/bk-auditor/election/V_0000000007",
    )
    now[0] += 5.0  # frozen for 5 s: nothing has run since
    resp = await env.stub.Status(pb.StatusRequest(), timeout=5)
    assert (resp.leader, resp.leadership, resp.leader_identity) == (False, "unconfirmed", "")
    assert await health_of(env, "leader") == "NOT_SERVING"
    with pytest.raises(aio.AioRpcError) as exc:
        await env.stub.TriggerCheck(pb.TriggerCheckRequest(check="scrutiny"), timeout=5)
    assert exc.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    lead.beat()  # the watchdog runs: the stall is seen, leadership stays unconfirmed ...
    lead.suspect()
    assert (await env.stub.Status(pb.StatusRequest(), timeout=5)).leadership == "unconfirmed"
    lead.confirm()  # ... until ZooKeeper shows the vote is still ours
    resp = await env.stub.Status(pb.StatusRequest(), timeout=5)
    assert (resp.leader, resp.leadership) == (True, "leader") and await health_of(env, "leader") == "SERVING"
    lead.set(False, leader="pod-1")
    resp = await env.stub.Status(pb.StatusRequest(), timeout=5)
    assert (resp.leader, resp.leadership, resp.vote_path, resp.leader_identity) == (False, "standby", "", "pod-1")


async def test_status_shows_a_crashed_task_waiting_for_its_restart(env: Env) -> None:
    board = env.state.tasks
    board.crash(
        "scrutiny", RuntimeError("/ledgers/bk-auditor/checks/scrutiny: cannot read (NoAuthError)"), restart_at=2e9
    )
    t = {t.name: t for t in (await env.stub.Status(pb.StatusRequest(), timeout=5)).tasks}["scrutiny"]
    assert (t.state, t.failures, t.restarts, t.restart_at) == ("failed", 1, 0, 2e9)
    assert "NoAuthError" in t.last_error and "/ledgers/bk-auditor/checks/scrutiny" in t.last_error
    board.restarted("scrutiny")
    t = {t.name: t for t in (await env.stub.Status(pb.StatusRequest(), timeout=5)).tasks}["scrutiny"]
    assert (t.state, t.restarts, t.HasField("restart_at")) == ("idle", 1, False)


async def test_health_not_serving_after_stop_with_a_second_client(env: Env) -> None:
    await env.server.set_health(ready=True)
    assert await health_of(env, "readiness") == "SERVING"
    await env.server.health.enter_graceful_shutdown()  # what stop() does first
    for service in ("", "liveness", "readiness", "leader"):
        assert await health_of(env, service) == "NOT_SERVING"
    await env.server.set_health(ready=True)  # ignored once shutting down
    assert await health_of(env, "readiness") == "NOT_SERVING"


# ------------------------------------------------------------------------------------------ client, reflection


async def test_client_helper_and_errors(env: Env) -> None:
    async with AdminClient(env.target, timeout=5) as client:
        status = await client.status()
        assert status.identity == "pod-0"
        assert (await client.findings(category="entry_no_replica")).findings[0].ledger_id == "7"
        assert (await client.explain("7")).metadata.ledger_id == "7"
        assert await client.health("liveness") == "SERVING"
        assert await client.health("nope") == "NOT_FOUND"
        with pytest.raises(
            StandbyReplyError, match=r"^standby; the leader is not known: trigger scrutiny refused"
        ) as refused:
            await client.trigger("scrutiny")
        assert refused.value.leader is None and isinstance(refused.value, AdminClientError)
        assert (await client.pause("x")).changed and (await client.resume()).changed
    await env.server.stop(0)
    async with AdminClient(env.target, timeout=2) as client:
        with pytest.raises(AdminClientError, match=f"cannot reach the bk-auditor admin API at {env.target}"):
            await client.status()


async def test_reflection_lists_our_services(env: Env) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    assert env.server.reflection_enabled
    stub = reflection_pb2_grpc.ServerReflectionStub(env.channel)
    call = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    resp = await call.read()
    names = {s.name for s in resp.list_services_response.service}
    assert {SERVICE_NAME, "grpc.health.v1.Health"} <= names
    assert SERVICE_NAME == "bkauditor.admin.v1.AdminService"
    call.cancel()


async def test_tls(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    state = DaemonState("tls-pod")
    server = AdminServer(StateBackend(state), "127.0.0.1:0", tls_cert=cert, tls_key=key, unauthenticated_reads=True)
    port = await server.start()
    try:
        async with AdminClient(f"127.0.0.1:{port}", timeout=5, tls_ca=cert) as client:
            assert (await client.status()).identity == "tls-pod"
        async with AdminClient(f"127.0.0.1:{port}", timeout=2) as plain:  # plaintext is refused
            with pytest.raises(AdminClientError):
                await plain.status()
    finally:
        await server.stop(0)


async def test_bind_failure_is_clear() -> None:
    state = DaemonState("x")
    first = AdminServer(StateBackend(state), "127.0.0.1:0")
    port = await first.start()
    try:
        second = AdminServer(StateBackend(state), f"127.0.0.1:{port}")
        with pytest.raises((OSError, RuntimeError), match=f"127.0.0.1:{port}"):
            await second.start()
    finally:
        await first.stop(0)


def test_server_and_client_on_uvloop() -> None:
    """The daemon may run on uvloop (`event_loop: uvloop`): the same round trip on a uvloop loop."""
    import uvloop

    async def round_trip() -> tuple[str, str, str]:
        state = DaemonState("uv-pod")
        state.tasks.register("scrutiny")
        server = AdminServer(StateBackend(state), "127.0.0.1:0")
        port = await server.start()
        try:
            async with AdminClient(f"127.0.0.1:{port}", timeout=5) as client:
                status = await client.status()
                return (type(asyncio.get_running_loop()).__module__, status.identity, await client.health("liveness"))
        finally:
            await server.stop(0)

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        module, identity, live = runner.run(round_trip())
    assert module.startswith("uvloop") and identity == "uv-pod" and live == "SERVING"
