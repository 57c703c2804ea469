"""One simulated bookie's answer to one request frame, as a real 4.17 bookie answers it (the real-cluster
test tests/realcluster/devcluster/test_simbookie.py holds the two to the same bytes).

Read-only: the reads the auditor sends (READ_ENTRY, READ_LAC, GET_LIST_OF_ENTRIES_OF_LEDGER,
GET_BOOKIE_INFO) and the harmless AUTH probe are answered; START_TLS gets EBADREQ as from a bookie without
TLS; every other operation (adds, WRITE_LAC, FORCE_LEDGER, batch reads) and every read carrying a field the
plain read does not have (a fence flag, a master key, a long poll) gets EBADREQ, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.durability.entrylist import encode_ranges
from auditor.durability.ranges import RangeSet

from .sources import LedgerSource
from .stored import Run, WrittenLedger, holds, without

# What GET_BOOKIE_INFO reports when asked (bytes); any plausible value does, nothing checks it.
TOTAL_DISK = 100 * 2**30
FREE_DISK = 60 * 2**30
AUTH_PLUGIN = "AuthDisabledPlugin"  # the plugin name of a bookie without authentication

READ_ENTRY = pb.READ_ENTRY
READ_LAC = pb.READ_LAC
GET_BOOKIE_INFO = pb.GET_BOOKIE_INFO
GET_LIST = pb.GET_LIST_OF_ENTRIES_OF_LEDGER
AUTH = pb.AUTH
START_TLS = pb.START_TLS


@dataclass(frozen=True)
class Faults:
    """Departures from the write schedule: entries a bookie lost, bookies that never answer."""

    missing: Mapping[tuple[str, int], frozenset[int]] = field(default_factory=dict)  # (bookie, ledger) -> ids
    silent: frozenset[str] = frozenset()  # they accept connections and read requests, and never answer


class BookieView:
    """What one bookie id holds and how it answers."""

    def __init__(self, bookie_id: str, source: LedgerSource, faults: Faults | None = None) -> None:
        self.bookie_id = bookie_id
        self.source = source
        self.faults = faults or Faults()
        self.silent = bookie_id in self.faults.silent
        self.requests = 0
        self.refused = 0
        self._handlers: dict[int, Callable[[pb.Request, pb.Response], None]] = {
            READ_ENTRY: self._read_entry,
            READ_LAC: self._read_lac,
            GET_BOOKIE_INFO: self._bookie_info,
            GET_LIST: self._entry_list,
            AUTH: self._auth,
        }

    def stored(self, ledger_id: int) -> tuple[WrittenLedger | None, tuple[Run, ...]]:
        """The ledger and the runs of entries this bookie holds (none: it does not know the ledger)."""
        written = self.source.ledger(ledger_id)
        if written is None:
            return None, ()
        runs = written.runs_on(self.bookie_id)
        lost = self.faults.missing.get((self.bookie_id, ledger_id))
        return written, without(runs, lost) if lost else runs

    def answer(self, frame: bytes) -> bytes | None:
        """The reply body to one request body; None when the bytes are not a v3 request (a bookie closes
        such a connection)."""
        self.requests += 1
        req = pb.Request()
        try:
            req.ParseFromString(frame)
        except (DecodeError, RuntimeError, ValueError):
            return None
        if not req.IsInitialized():
            return None
        h = req.header
        resp = pb.Response()
        resp.header.version = pb.VERSION_THREE
        resp.header.operation = h.operation
        resp.header.txnId = h.txnId
        handler = self._handlers.get(h.operation)
        if h.version != pb.VERSION_THREE:
            resp.status = pb.EBADVERSION
        elif handler is None or _carries_more_than_a_plain_read(req):
            self.refused += 1
            resp.status = pb.EBADREQ
        else:
            handler(req, resp)
        return resp.SerializeToString()  # type: ignore[no-any-return]

    def _read_entry(self, req: pb.Request, resp: pb.Response) -> None:
        lid, entry = req.readRequest.ledgerId, req.readRequest.entryId
        sub = resp.readResponse
        sub.ledgerId, sub.entryId = lid, entry
        written, runs = self.stored(lid)
        if written is None or not runs:
            status = pb.ENOLEDGER
        elif entry == -1 or holds(runs, entry):
            status = pb.EOK
            sub.body = written.body(runs[-1][1] if entry == -1 else entry)
            sub.maxLAC = runs[-1][1] - 1  # the highest LAC its entries carry: entry e carries e - 1
        else:
            status = pb.ENOENTRY
        resp.status = sub.status = status

    def _read_lac(self, req: pb.Request, resp: pb.Response) -> None:
        lid = req.readLacRequest.ledgerId
        sub = resp.readLacResponse
        sub.ledgerId = lid
        written, runs = self.stored(lid)
        if written is None or not runs:
            status = pb.ENOENTRY  # not ENOLEDGER: a real bookie says ENOENTRY when it has no body to send
        else:
            status = pb.EOK
            sub.lastEntryBody = written.body(runs[-1][1])  # no explicit LAC: writers do not send one
        resp.status = sub.status = status

    def _entry_list(self, req: pb.Request, resp: pb.Response) -> None:
        lid = req.getListOfEntriesOfLedgerRequest.ledgerId
        sub = resp.getListOfEntriesOfLedgerResponse
        sub.ledgerId = lid
        written, runs = self.stored(lid)
        if written is None or not runs:
            status = pb.ENOLEDGER
        else:
            status = pb.EOK
            sub.availabilityOfEntriesOfLedger = encode_ranges(RangeSet(runs))  # as a real bookie writes it
        resp.status = sub.status = status

    def _bookie_info(self, req: pb.Request, resp: pb.Response) -> None:
        requested = req.getBookieInfoRequest.requested
        sub = resp.getBookieInfoResponse
        if requested & pb.GetBookieInfoRequest.TOTAL_DISK_CAPACITY:
            sub.totalDiskCapacity = TOTAL_DISK
        if requested & pb.GetBookieInfoRequest.FREE_DISK_SPACE:
            sub.freeDiskSpace = FREE_DISK
        resp.status = sub.status = pb.EOK

    def _auth(self, req: pb.Request, resp: pb.Response) -> None:
        resp.status = pb.EOK
        resp.authResponse.authPluginName = AUTH_PLUGIN
        resp.authResponse.payload = b""


def _carries_more_than_a_plain_read(req: pb.Request) -> bool:
    """Fields our schema lacks are exactly the dangerous ones (a fence flag, a master key, a long poll, a
    write's sub-message): they parse as unknown fields."""
    parts: list[Message] = [req, req.header]
    parts.extend(value for fd, value in req.ListFields() if fd.message_type is not None and fd.name != "header")
    return any(len(UnknownFieldSet(part)) for part in parts)
