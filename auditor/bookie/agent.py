"""The auditor's side of the bookie-side index agent (auditor/agent/, docs/agent.md): which entries of a
ledger a DbLedgerStorage bookie's index holds, for many ledgers per call, and digest checks of the stored
copies done where the data is.

What an answer means:

* PRESENT: the bookie's index knows the ledger and holds exactly `entries`. The index is what the bookie
  flushed: entries still in its write cache (not yet checkpointed; devcluster flushes every second,
  production bookies every `flushInterval`, 60 s by default) are not in it. `index_as_of` is when the
  agent's view was refreshed. So an entry missing from a PRESENT answer is only a candidate: confirm
  absences with the bookie itself (READ_ENTRY) before calling a copy missing.
* ABSENT: neither index (ledgers, locations) knows the ledger, as of `index_as_of`; same caveat.
* UNKNOWN: the agent could not be reached, refused us, or could not read its index: `error` says why.
  No method of this client raises for that; `describe` is the one exception (AgentUnavailableError).

Every call carries the bearer token (`AgentClientConfig.token`) and, with `tls`, runs over TLS (mutual
when a client certificate is given). The agent is read-only by construction; so is this client.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auditor._proto import bookie_agent_pb2 as pb
from auditor.durability.model import DigestType
from auditor.durability.ranges import RangeSet
from auditor.errors import BookieError, ConfigError

from .results import Outcome

if TYPE_CHECKING:
    from grpc import aio

    from auditor._proto import bookie_agent_pb2_grpc as pb_grpc

Address = tuple[str, int]
AddressSource = Address | Callable[[], Address | Awaitable[Address]]
# The agent's own bound (auditor/agent/service.py MAX_LEDGERS_PER_CALL is 10,000): half, to stay clear.
LEDGERS_PER_CALL = 5_000

_OUTCOMES = {pb.OUTCOME_PRESENT: Outcome.PRESENT, pb.OUTCOME_ABSENT: Outcome.ABSENT}


class AgentUnavailableError(BookieError):
    """The agent did not answer `describe` (unreachable, refused our token or certificate, or failed)."""


@dataclass(frozen=True, slots=True)
class AgentTls:
    """PEM material: `ca` verifies the agent's certificate (None: the system roots); `cert` + `key` are
    ours, for an agent that requires client certificates; `server_name` is the name the agent's
    certificate must carry when it differs from the host dialled."""

    ca: bytes | None = None
    cert: bytes | None = field(default=None, repr=False)
    key: bytes | None = field(default=None, repr=False)
    server_name: str | None = None

    @classmethod
    def from_files(
        cls,
        ca_file: Path | None,
        cert_file: Path | None,
        key_file: Path | None,
        server_name: str | None = None,
        *,
        prefix: str = "agent.tls.",
    ) -> AgentTls:
        """Read the files; ConfigError naming the setting (`prefix` + ca_file/cert_file/key_file)."""
        if (cert_file is None) != (key_file is None):
            raise ConfigError(f"{prefix}cert_file and {prefix}key_file go together")

        def read(path: Path | None, name: str) -> bytes | None:
            if path is None:
                return None
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise ConfigError(f"{prefix}{name} {path}: {exc.strerror or exc}") from None
            if b"-----BEGIN " not in data:
                raise ConfigError(f"{prefix}{name} {path} is not PEM")
            return data

        return cls(read(ca_file, "ca_file"), read(cert_file, "cert_file"), read(key_file, "key_file"), server_name)


@dataclass(frozen=True, slots=True)
class AgentClientConfig:
    token: bytes | None = field(default=None, repr=False)
    tls: AgentTls | None = None
    timeout: float = 5.0


@dataclass(frozen=True, slots=True)
class AgentsConfig:
    """Where the agents are: each bookie's resolved host at `port` (None: no agents), unless `addresses`
    names another `host:port` for it; and how to talk to them."""

    port: int | None = None
    addresses: Mapping[str, Address] = field(default_factory=dict)
    client: AgentClientConfig = field(default_factory=AgentClientConfig)


@dataclass(frozen=True, slots=True)
class AgentInfo:
    bookie_id: str  # as the agent knows it (the bookie's cookie or conf); "" when it could not tell
    storage: str  # "db"
    index_as_of: float  # unix time of the agent's view of the index (0: never read)
    ledger_dirs: tuple[str, ...]
    index_dirs: tuple[str, ...]
    version: str = ""


@dataclass(frozen=True, slots=True)
class AgentEntries:
    ledger_id: int
    outcome: Outcome
    entries: RangeSet | None  # PRESENT: the indexed entry ids; ABSENT: empty; UNKNOWN: None
    index_as_of: float
    error: str | None = None


@dataclass(frozen=True, slots=True)
class AgentVerifyResult:
    ledger_id: int
    outcome: Outcome  # PRESENT/ABSENT: whether the index knows the ledger; UNKNOWN: see error
    verified: int  # entries whose stored bytes passed the digest check
    verified_bytes: int
    corrupt: list[tuple[int, str]]  # (entry id, what is wrong)
    absent: RangeSet  # asked for, not in the index (same caveat as list_entries)
    unreadable: RangeSet  # indexed, but not readable where the index puts it: UNKNOWN, not missing
    next_entry: int | None  # max_bytes cut the call short: resume here
    error: str | None = None
    index_as_of: float = 0.0


def _ranges(ranges: Sequence[pb.EntryRange]) -> RangeSet:
    return RangeSet.of((r.first, r.last) for r in ranges)


class AgentClient:
    """One bookie's agent. Create it anywhere; the gRPC channel is opened on first use (in the running
    event loop) and re-opened, with the address resolved again, after the agent was unreachable."""

    def __init__(self, bookie_id: str, address: AddressSource, config: AgentClientConfig) -> None:
        self.bookie_id = bookie_id
        self._address = address
        self.config = config
        self._channel: aio.Channel | None = None
        self._stub: pb_grpc.BookieAgentStub | None = None  # (gRPC is imported on first use: see _connect)
        self.target = ""

    async def _resolve(self) -> Address:
        if isinstance(self._address, tuple):
            return self._address
        got = self._address()
        return await got if inspect.isawaitable(got) else got

    async def _connect(self) -> pb_grpc.BookieAgentStub:
        if self._stub is not None:
            return self._stub
        # Imported here, not with the module: the check's worker processes are forked from a server that
        # preloads the checks, and gRPC must never be carried across a fork (docs/spark.md).
        import grpc
        from grpc import aio

        from auditor._proto import bookie_agent_pb2_grpc as pb_grpc

        host, port = await self._resolve()
        self.target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        tls = self.config.tls
        if tls is None:
            self._channel = aio.insecure_channel(self.target)
        else:
            creds = grpc.ssl_channel_credentials(
                root_certificates=tls.ca, private_key=tls.key, certificate_chain=tls.cert
            )
            options = [("grpc.ssl_target_name_override", tls.server_name)] if tls.server_name else []
            self._channel = aio.secure_channel(self.target, creds, options=options)
        self._stub = pb_grpc.BookieAgentStub(self._channel)
        return self._stub

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        token = self.config.token
        return (("authorization", "Bearer " + token.decode("ascii")),) if token else ()

    async def _call(self, name: str, request: Any, timeout: float | None) -> Any:
        """The reply, or an AgentUnavailableError naming the bookie, the agent and what went wrong."""
        import grpc
        from grpc import aio

        try:
            stub = await self._connect()
            method = getattr(stub, name)
            return await method(request, timeout=timeout or self.config.timeout, metadata=self._metadata())
        except aio.AioRpcError as exc:
            code = exc.code()
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                await self._drop()
            raise AgentUnavailableError(
                f"agent of bookie {self.bookie_id} at {self.target}: {name}: {code.name}: {exc.details() or ''}"
            ) from None
        except (OSError, ValueError) as exc:  # resolution failed, or a token that is not ASCII
            raise AgentUnavailableError(f"agent of bookie {self.bookie_id}: {name}: {exc}") from None

    async def _drop(self) -> None:
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            await channel.close()

    async def describe(self) -> AgentInfo:
        r = await self._call("Describe", pb.DescribeRequest(), None)
        return AgentInfo(r.bookie_id, r.storage, r.index_as_of, tuple(r.ledger_dirs), tuple(r.index_dirs), r.version)

    async def list_entries(self, ledger_ids: Sequence[int], *, timeout: float | None = None) -> list[AgentEntries]:
        """One answer per id of `ledger_ids`, in that order; UNKNOWN (with the reason) for what the agent
        could not answer."""
        ids = list(ledger_ids)
        answers: dict[int, AgentEntries] = {}
        for start in range(0, len(ids), LEDGERS_PER_CALL):
            chunk = ids[start : start + LEDGERS_PER_CALL]
            try:
                r = await self._call("ListEntries", pb.ListEntriesRequest(ledger_ids=chunk), timeout)
            except AgentUnavailableError as exc:
                for lid in chunk:
                    answers[lid] = AgentEntries(lid, Outcome.UNKNOWN, None, 0.0, str(exc))
                continue
            for led in r.ledgers:
                outcome = _OUTCOMES.get(led.outcome, Outcome.UNKNOWN)
                if outcome is Outcome.UNKNOWN:
                    answers[led.ledger_id] = AgentEntries(
                        led.ledger_id, outcome, None, r.index_as_of, led.error or "the agent could not tell"
                    )
                else:
                    entries = _ranges(led.entries) if outcome is Outcome.PRESENT else RangeSet()
                    answers[led.ledger_id] = AgentEntries(led.ledger_id, outcome, entries, r.index_as_of)
        missing = "the agent's answer left this ledger out"
        return [answers.get(lid) or AgentEntries(lid, Outcome.UNKNOWN, None, 0.0, missing) for lid in ids]

    async def verify_entries(
        self,
        ledger_id: int,
        digest_type: DigestType,
        password: bytes,
        entries: RangeSet,
        *,
        max_bytes: int,
        timeout: float | None = None,
    ) -> AgentVerifyResult:
        """Have the agent read `entries` from its entry logs and check their digests, up to about
        `max_bytes` (0: the agent's own bound); UNKNOWN, everything unreadable, when it cannot."""
        request = pb.VerifyEntriesRequest(
            ledger_id=ledger_id,
            digest_type=digest_type.value,
            password=password,
            entries=[pb.EntryRange(first=a, last=b) for a, b in entries.ranges],
            max_bytes=max_bytes,
        )
        try:
            r = await self._call("VerifyEntries", request, timeout)
        except AgentUnavailableError as exc:
            return AgentVerifyResult(ledger_id, Outcome.UNKNOWN, 0, 0, [], RangeSet(), entries, None, str(exc))
        outcome = _OUTCOMES.get(r.outcome, Outcome.UNKNOWN)
        return AgentVerifyResult(
            ledger_id,
            outcome,
            r.verified,
            r.verified_bytes,
            [(c.entry_id, c.detail) for c in r.corrupt],
            _ranges(r.absent),
            _ranges(r.unreadable),
            r.next_entry if r.HasField("next_entry") else None,
            (r.error or "the agent could not tell") if outcome is Outcome.UNKNOWN else None,
            r.index_as_of,
        )

    async def close(self) -> None:
        await self._drop()
