"""Requests from outside the process: the admin API (a real gRPC server on 127.0.0.1, called through the
generated stubs) and the check names of `bk-auditor check --checks`. Whatever a client sends, the answer
is a deliberate status (never INTERNAL or UNKNOWN) whose message names what was wrong, and stays short."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from auditor._proto import admin_pb2 as pb
from auditor._proto import admin_pb2_grpc as pb_grpc
from auditor.admin.errors import LedgerNotFoundError
from auditor.admin.models import LedgerExplanation
from auditor.admin.server import AdminServer
from auditor.checks.per_ledger import ALIASES, CHECKS, resolve_checks
from auditor.daemon.backend import StateBackend
from auditor.daemon.state import DaemonState
from auditor.durability.ids import LedgerId, LedgerIdError

from .contract import parse_contract
from .strategies import scoped_ledger_ids, weird_numbers

TASKS = ["bookies", "scrutiny", "ledger", "open"]
# A round trip crosses threads (the server's loop, gRPC's own): on a loaded machine the scheduler alone can
# hold one for seconds. The bound is there to catch a stall in our code, so it is the RPC's own deadline.
RPC_SECONDS = 10.0
DELIBERATE = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
}


class _Daemon:
    """An admin server on its own event loop thread, as in the daemon; a blocking client here."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        state = DaemonState("prop-0")
        for name in TASKS:
            state.tasks.register(name, interval_seconds=60)
        state.leadership.set(True, "prop-0")

        async def trigger(check: str) -> bool:
            return True

        async def explain(ledger: LedgerId) -> LedgerExplanation:
            raise LedgerNotFoundError(f"ledger {ledger} does not exist")

        self.server = AdminServer(
            StateBackend(state, trigger=trigger, explain=explain), "127.0.0.1:0", reflection=False
        )
        port = self._run(self.server.start())
        self.server.follow_leadership(state.leadership)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = pb_grpc.AdminServiceStub(self.channel)

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def call(self, method, request):
        """(status, details) of one call."""
        try:
            method(request, timeout=10)
            return grpc.StatusCode.OK, ""
        except grpc.RpcError as exc:
            return exc.code(), exc.details() or ""

    def close(self) -> None:
        self.channel.close()
        self._run(self.server.stop(0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def daemon() -> Iterator[_Daemon]:
    d = _Daemon()
    yield d
    d.close()


ledger_texts = st.one_of(
    st.text(max_size=50),
    weird_numbers,
    scoped_ledger_ids.map(lambda i: i.qualified_name),
    st.integers(0, 2**64).map(str),
    st.just("9" * 5000),
    st.just("1:" + "9" * 5000),
)


def _expected(text: str) -> LedgerId | None:
    try:
        return LedgerId.parse(text)
    except LedgerIdError:
        return None


@given(ledger_texts)
def test_explain_ledger(daemon: _Daemon, text: str) -> None:
    code, details = parse_contract(
        lambda: daemon.call(daemon.stub.ExplainLedger, pb.ExplainLedgerRequest(ledger=text)),
        (),
        max_seconds=RPC_SECONDS,
    ).value
    assert code in DELIBERATE and len(details) < 300, (code, details[:300])
    if _expected(text) is None:
        assert code is grpc.StatusCode.INVALID_ARGUMENT and repr(text[:24])[:-1] in details, (code, details)
    else:
        assert code is grpc.StatusCode.NOT_FOUND


@given(ledger_texts, st.text(max_size=20), st.text(max_size=20), st.integers(-(2**31), 2**31 - 1), st.booleans())
def test_list_findings(daemon: _Daemon, ledger: str, category: str, bookie: str, limit: int, resolved: bool) -> None:
    req = pb.ListFindingsRequest(
        ledger=ledger, category=category, bookie=bookie, limit=limit, include_resolved=resolved
    )
    code, details = parse_contract(
        lambda: daemon.call(daemon.stub.ListFindings, req), (), max_seconds=RPC_SECONDS
    ).value
    assert code in DELIBERATE and len(details) < 300, (code, details[:300])
    if limit < 0 or (ledger and _expected(ledger) is None):
        assert code is grpc.StatusCode.INVALID_ARGUMENT
    else:
        assert code is grpc.StatusCode.OK


@given(st.one_of(st.sampled_from(TASKS), st.text(max_size=40), st.just("x" * 100_000)))
def test_trigger_check(daemon: _Daemon, check: str) -> None:
    code, details = parse_contract(
        lambda: daemon.call(daemon.stub.TriggerCheck, pb.TriggerCheckRequest(check=check)), (), max_seconds=RPC_SECONDS
    ).value
    assert code in DELIBERATE and len(details) < 300, (code, details[:300])
    if check in TASKS:
        assert code is grpc.StatusCode.OK
    elif not check:
        assert code is grpc.StatusCode.INVALID_ARGUMENT
    else:
        assert code is grpc.StatusCode.NOT_FOUND and repr(check[:24])[:-1] in details, details


@given(
    st.lists(
        st.one_of(st.sampled_from(sorted(CHECKS) + sorted(ALIASES) + ["all", "ALL", "Scrutiny"]), st.text(max_size=20)),
        max_size=5,
    )
)
def test_check_names(names: list[str]) -> None:
    out = parse_contract(lambda: resolve_checks(names), ValueError)
    if out.ok:
        assert out.value and set(out.value) <= set(CHECKS) and len(set(out.value)) == len(out.value)
    else:
        assert any(repr(n)[:-1][:25] in str(out.error) for n in names), str(out.error)
