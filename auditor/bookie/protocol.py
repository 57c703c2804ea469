"""Bookie v3 wire protocol: framing, the read-only request builders, the safety gate, reply decoding.

One module on purpose (just over 600 lines): the gate and the decoders apply the same framing and
message rules, and the fuzz and vector tests drive this one module.

Pure (no sockets, no asyncio) so the fuzz and vector tests can drive it directly.

Framing (spec bookie-protocol.md §1.2): a 4-byte big-endian signed length N, then N bytes of one
protobuf message (`Request` one way, `Response` the other). `N + 4` may not exceed the frame limit
(5 MiB by default on bookies; configurable here because bookies can be configured larger).
"""

from __future__ import annotations

import enum
import re
import struct
from dataclasses import dataclass
from typing import Any, cast

from google.protobuf.message import DecodeError, Message
from google.protobuf.unknown_fields import UnknownFieldSet

from auditor._proto import bookkeeper_protocol_pb2 as pb
from auditor.durability.varint import VarintError
from auditor.durability.varint import decode as _decode_varint
from auditor.durability.varint import encode as _varint
from auditor.errors import BookieError

LENGTH = struct.Struct(">i")
DEFAULT_MAX_FRAME_SIZE = 5 * 1024 * 1024  # bookie default nettyMaxFrameSizeBytes; counts the 4 length bytes
MAX_TXN_ID = 2**64 - 1
MAX_LONG = 2**63 - 1
AUTH_DISABLED_PLUGIN = "AuthDisabledPlugin"


class Op(enum.IntEnum):
    READ_ENTRY = 1
    ADD_ENTRY = 2
    RANGE_READ_ENTRY = 3
    RANGE_ADD_ENTRY = 4
    AUTH = 5
    WRITE_LAC = 6
    READ_LAC = 7
    GET_BOOKIE_INFO = 8
    START_TLS = 9
    FORCE_LEDGER = 10
    GET_LIST_OF_ENTRIES_OF_LEDGER = 11
    BATCH_READ_ENTRY = 12


class Status(enum.IntEnum):
    EOK = 0
    ENOLEDGER = 402
    ENOENTRY = 403
    EBADREQ = 404
    EIO = 501
    EUA = 502
    EBADVERSION = 503
    EFENCED = 504
    EREADONLY = 505
    ETOOMANYREQUESTS = 506
    EUNKNOWNLEDGERSTATE = 507


class BookieInfoFlags(enum.IntFlag):
    TOTAL_DISK_CAPACITY = 0x01
    FREE_DISK_SPACE = 0x02


# The only operations the auditor may put on the wire, and the sub-message each one carries.
# Everything else (adds, write-LAC, force, batch reads) is refused by `check_request_is_safe`. START_TLS
# neither writes nor fences: it asks the bookie to switch the connection to TLS (spec §1.5).
SAFE_OPERATIONS: dict[Op, str] = {
    Op.READ_ENTRY: "readRequest",
    Op.READ_LAC: "readLacRequest",
    Op.GET_BOOKIE_INFO: "getBookieInfoRequest",
    Op.GET_LIST_OF_ENTRIES_OF_LEDGER: "getListOfEntriesOfLedgerRequest",
    Op.AUTH: "authRequest",
    Op.START_TLS: "startTLSRequest",
}
# Replies this module can decode. ADD_ENTRY is here only so the repair role's recovery-add client
# (auditor/repair/writer.py, with its own request gate) can read its answers: decoding a reply sends
# nothing, and an auditor connection never has an ADD pending, so an ADD reply on it is handled exactly
# as before: it answers nothing that connection sent.
_RESPONSE_FIELD: dict[Op, str] = {
    Op.ADD_ENTRY: "addResponse",
    Op.READ_ENTRY: "readResponse",
    Op.READ_LAC: "readLacResponse",
    Op.GET_BOOKIE_INFO: "getBookieInfoResponse",
    Op.GET_LIST_OF_ENTRIES_OF_LEDGER: "getListOfEntriesOfLedgerResponse",
    Op.AUTH: "authResponse",
    Op.START_TLS: "startTLSResponse",
}
# Replies whose sub-message carries no status of its own (the top-level one is the answer).
_NO_SUB_STATUS = frozenset({Op.AUTH, Op.START_TLS})
# Required fields (besides `status`) each reply sub-message must carry.
_RESPONSE_REQUIRED: dict[Op, tuple[str, ...]] = {
    Op.ADD_ENTRY: ("ledgerId", "entryId"),
    Op.READ_ENTRY: ("ledgerId", "entryId"),
    Op.READ_LAC: ("ledgerId",),
    Op.GET_BOOKIE_INFO: (),
    Op.GET_LIST_OF_ENTRIES_OF_LEDGER: ("ledgerId",),
    Op.AUTH: ("authPluginName", "payload"),
    Op.START_TLS: (),
}


class ProtocolError(BookieError):
    """The peer sent something that is not the bookie v3 protocol; the connection must be dropped."""


class FrameError(ProtocolError):
    """A bad length prefix: negative, or over the frame limit."""


class UnsafeRequestError(BookieError):
    """Someone tried to send a request the auditor must never send (a write, a fence, a long poll...).

    Raised explicitly (never with `assert`), so the gate holds under `python -O` too.
    """


# ----- requests ------------------------------------------------------------------------------------
Request = pb.Request  # what every builder below returns


def _header(req: pb.Request, op: Op, txn_id: int) -> None:
    if not 0 <= txn_id <= MAX_TXN_ID:
        raise ValueError(f"txn id {txn_id} is not a uint64")
    req.header.version = pb.VERSION_THREE
    req.header.operation = cast("pb.OperationType", int(op))
    req.header.txnId = txn_id


# `type(x) is int` first: one test for the ids of every request (a bool, or an int subclass, is refused).
def _check_ledger(ledger_id: int) -> None:
    if type(ledger_id) is not int or not 0 <= ledger_id <= MAX_LONG:
        raise ValueError(f"ledger id {ledger_id!r} is not in 0..2^63-1")


def check_entry_id(entry_id: int) -> None:
    if type(entry_id) is not int or not -1 <= entry_id <= MAX_LONG:
        raise ValueError(f"entry id {entry_id!r} is not in -1..2^63-1")


def read_entry_request(txn_id: int, ledger_id: int, entry_id: int) -> pb.Request:
    """A plain READ_ENTRY (entry -1 = the bookie's highest entry). No fence, no long poll: the message
    type cannot express them."""
    _check_ledger(ledger_id)
    check_entry_id(entry_id)
    req = pb.Request()
    _header(req, Op.READ_ENTRY, txn_id)
    req.readRequest.ledgerId = ledger_id
    req.readRequest.entryId = entry_id
    return req


def read_lac_request(txn_id: int, ledger_id: int) -> pb.Request:
    _check_ledger(ledger_id)
    req = pb.Request()
    _header(req, Op.READ_LAC, txn_id)
    req.readLacRequest.ledgerId = ledger_id
    return req


def bookie_info_request(
    txn_id: int, requested: int = int(BookieInfoFlags.TOTAL_DISK_CAPACITY | BookieInfoFlags.FREE_DISK_SPACE)
) -> pb.Request:
    """GET_BOOKIE_INFO; `requested=0` is a cheap liveness ping."""
    req = pb.Request()
    _header(req, Op.GET_BOOKIE_INFO, txn_id)
    req.getBookieInfoRequest.requested = requested
    return req


def entry_list_request(txn_id: int, ledger_id: int) -> pb.Request:
    _check_ledger(ledger_id)
    req = pb.Request()
    _header(req, Op.GET_LIST_OF_ENTRIES_OF_LEDGER, txn_id)
    req.getListOfEntriesOfLedgerRequest.ledgerId = ledger_id
    return req


def auth_probe_request(txn_id: int, plugin: str = AUTH_DISABLED_PLUGIN, payload: bytes = b"") -> pb.Request:
    """The harmless AUTH probe (spec §1.4): a bookie without auth answers EOK naming its plugin."""
    req = pb.Request()
    _header(req, Op.AUTH, txn_id)
    req.authRequest.authPluginName = plugin
    req.authRequest.payload = payload
    return req


def start_tls_request(txn_id: int) -> pb.Request:
    """START_TLS: the first frame of a TLS connection; the empty sub-message must be present (§1.5)."""
    req = pb.Request()
    _header(req, Op.START_TLS, txn_id)
    req.startTLSRequest.SetInParent()
    return req


def _unknown_fields(msg: Message) -> int:
    return len(UnknownFieldSet(msg))


def check_request_is_safe(req: object) -> None:
    """Refuse anything but a well-formed READ_ENTRY / READ_LAC / GET_BOOKIE_INFO / GET_LIST / AUTH /
    START_TLS.

    Called on every frame before it is written. Besides the operation it checks that exactly the
    matching sub-message is set, nothing unknown hides in the message (a fence flag or masterKey parsed
    in from foreign bytes would be kept as unknown fields and re-serialised), and priority is unset
    (the auditor must not compete with recovery reads).
    """
    if not isinstance(req, pb.Request):
        raise UnsafeRequestError(f"not a bookie Request: {type(req).__name__}")
    if not req.IsInitialized():
        raise UnsafeRequestError(f"request misses required fields: {req.FindInitializationErrors()}")
    header = req.header
    if header.version != pb.VERSION_THREE:
        raise UnsafeRequestError(f"protocol version {header.version} (only 3 may be sent)")
    try:
        op = Op(header.operation)
    except ValueError:
        raise UnsafeRequestError(f"unknown operation {header.operation}") from None
    sub = SAFE_OPERATIONS.get(op)
    if sub is None:
        raise UnsafeRequestError(f"operation {op.name} may never be sent by the auditor")
    if header.HasField("priority") and header.priority != 0:
        raise UnsafeRequestError("requests must not carry a priority")
    present = [fd.name for fd, _ in req.ListFields() if fd.name != "header"]
    if present != [sub]:
        raise UnsafeRequestError(f"{op.name} must carry exactly {sub}, has {present}")
    for part in (req, header, getattr(req, sub)):
        if _unknown_fields(part):
            raise UnsafeRequestError(f"{op.name} request carries unknown fields (e.g. a fence flag)")


def encode_request(req: pb.Request) -> bytes:
    """The framed bytes of a request, after `check_request_is_safe`."""
    check_request_is_safe(req)
    body: bytes = req.SerializeToString()
    return LENGTH.pack(len(body)) + body


# ----- pre-gated frames: the two requests a scan sends by the thousand --------------------------------
class GatedFrame:
    """The framed bytes of a GET_LIST or READ_ENTRY request, written by `entry_list_frame` /
    `read_entry_frame` without building and gating a message per request (about 45,000 of the ~50,000
    CPU instructions it took to encode one). They are byte for byte what `encode_request` makes of
    `entry_list_request` / `read_entry_request` for the same values, which passes the gate: the frames
    differ from those only in the varint values of txnId, ledgerId and entryId, never in operation, fields
    or flags. `_check_gated_frames` proves that equality on edge values when this module loads, so a change
    that broke it would stop the process from starting (fail closed).

    The promise is "nothing the auditor holds can send a write", so it holds by construction, twice over:
    only this module can make one (the constructor wants `_MINT`, a module-private token: a frame built
    from foreign bytes raises), and the read-only client's gate (`BookieClient._encode`) sends only what
    `gated_bytes` recognises as exactly one of the two shapes, so even a forged instance carrying a write,
    a fence flag or a master key is refused before the socket."""

    __slots__ = ("frame",)

    def __init__(self, frame: bytes, token: object = None) -> None:
        if token is not _MINT:
            raise UnsafeRequestError("a GatedFrame is made only by protocol.entry_list_frame / read_entry_frame")
        self.frame = frame


_MINT = object()  # the constructor's token: only this module's frame builders hold it


def _key(field_number: int, wire_type: int) -> bytes:
    return _varint(field_number << 3 | wire_type)


_VARINT, _LEN = 0, 2
_HEADER_FIELDS = pb.BKPacketHeader.DESCRIPTOR.fields_by_name
_REQUEST_FIELDS = pb.Request.DESCRIPTOR.fields_by_name


def _header_start(op: Op) -> bytes:
    """version 3 and the operation: the header up to its txnId's value."""
    return (
        _key(_HEADER_FIELDS["version"].number, _VARINT)
        + _varint(pb.VERSION_THREE)
        + _key(_HEADER_FIELDS["operation"].number, _VARINT)
        + _varint(int(op))
        + _key(_HEADER_FIELDS["txnId"].number, _VARINT)
    )


_LIST_HEADER = _header_start(Op.GET_LIST_OF_ENTRIES_OF_LEDGER)
_READ_HEADER = _header_start(Op.READ_ENTRY)
_HEADER_KEY = _key(_REQUEST_FIELDS["header"].number, _LEN)
_LIST_KEY = _key(_REQUEST_FIELDS["getListOfEntriesOfLedgerRequest"].number, _LEN)
_READ_KEY = _key(_REQUEST_FIELDS["readRequest"].number, _LEN)
_LEDGER_KEY = _key(pb.GetListOfEntriesOfLedgerRequest.DESCRIPTOR.fields_by_name["ledgerId"].number, _VARINT)
_READ_LEDGER_KEY = _key(pb.ReadRequest.DESCRIPTOR.fields_by_name["ledgerId"].number, _VARINT)
_READ_ENTRY_KEY = _key(pb.ReadRequest.DESCRIPTOR.fields_by_name["entryId"].number, _VARINT)


def _gated(header_start: bytes, txn_id: int, sub_key: bytes, sub: bytes) -> GatedFrame:
    if not 0 <= txn_id <= MAX_TXN_ID:
        raise ValueError(f"txn id {txn_id} is not a uint64")
    header = header_start + _varint(txn_id)
    body = _HEADER_KEY + bytes((len(header),)) + header + sub_key + bytes((len(sub),)) + sub
    return GatedFrame(LENGTH.pack(len(body)) + body, _MINT)


def entry_list_frame(txn_id: int, ledger_id: int) -> GatedFrame:
    """`encode_request(entry_list_request(txn_id, ledger_id))`, without the message (see GatedFrame)."""
    _check_ledger(ledger_id)
    return _gated(_LIST_HEADER, txn_id, _LIST_KEY, _LEDGER_KEY + _varint(ledger_id))


def read_entry_frame(txn_id: int, ledger_id: int, entry_id: int) -> GatedFrame:
    """`encode_request(read_entry_request(txn_id, ledger_id, entry_id))`, without the message."""
    _check_ledger(ledger_id)
    check_entry_id(entry_id)
    sub = _READ_LEDGER_KEY + _varint(ledger_id) + _READ_ENTRY_KEY + _varint(entry_id)
    return _gated(_READ_HEADER, txn_id, _READ_KEY, sub)


# One protobuf varint in its shortest form (no trailing zero byte; a tenth byte only for the top bit of
# a uint64), as the builders write it: what passes re-encodes to the same bytes.
_VARINT_RE = rb"(?:[\x00-\x7f]|[\x80-\xff]{1,8}[\x01-\x7f]|[\x80-\xff]{9}\x01)"


def _gated_shape(header_start: bytes, sub_key: bytes, sub_fields: bytes) -> re.Pattern[bytes]:
    """The one shape a pre-gated frame of this kind has: length prefix, the header (version 3, the
    operation, a txnId and nothing else), the operation's sub-message with exactly its fields, and
    nothing after. Groups: header length, header, sub length, sub (the lengths are checked apart)."""
    return re.compile(
        rb"\A[\s\S]{4}"
        + re.escape(_HEADER_KEY)
        + rb"([\x00-\x7f])("
        + re.escape(header_start)
        + _VARINT_RE
        + rb")"
        + re.escape(sub_key)
        + rb"([\x00-\x7f])("
        + sub_fields
        + rb")\Z"
    )


_GATED_SHAPES = (
    _gated_shape(_LIST_HEADER, _LIST_KEY, re.escape(_LEDGER_KEY) + _VARINT_RE),
    _gated_shape(
        _READ_HEADER, _READ_KEY, re.escape(_READ_LEDGER_KEY) + _VARINT_RE + re.escape(_READ_ENTRY_KEY) + _VARINT_RE
    ),
)


def gated_bytes(request: GatedFrame) -> bytes:
    """The frame of a pre-gated request, once it is proven to be a GET_LIST or READ_ENTRY of exactly the
    shape the builders write (no other operation, field, flag or trailing byte, every length right);
    UnsafeRequestError otherwise. The read-only gate's check at send, about a microsecond a frame."""
    frame = request.frame
    if type(frame) is bytes:
        for shape in _GATED_SHAPES:
            m = shape.match(frame)
            if (
                m is not None
                and m.group(1)[0] == len(m.group(2))
                and m.group(3)[0] == len(m.group(4))
                and LENGTH.unpack_from(frame)[0] == len(frame) - 4
            ):
                return frame
    raise UnsafeRequestError("a pre-gated frame is not a GET_LIST or READ_ENTRY request of the gated shape")


def _check_gated_frames() -> None:
    """Every pre-gated frame shape equals the gated encoding of the same request (edge values of every
    varint length). Raises UnsafeRequestError otherwise: nothing may be sent that the gate did not pass."""
    values = [0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**31 - 1, 2**32, 2**56, MAX_LONG]
    for i, txn in enumerate([*values, MAX_TXN_ID]):
        ledger = values[i % len(values)]
        entry = [-1, *values][i % (len(values) + 1)]
        pairs = [
            (entry_list_frame(txn, ledger), entry_list_request(txn, ledger)),
            (read_entry_frame(txn, ledger, entry), read_entry_request(txn, ledger, entry)),
        ]
        for fast, req in pairs:
            if fast.frame != encode_request(req) or gated_bytes(fast) != fast.frame:
                raise UnsafeRequestError(f"pre-gated frame differs from the gated encoding of {req}")


# ----- frames -------------------------------------------------------------------------------------
class FrameDecoder:
    """Splits a byte stream into frame bodies. Raises FrameError on a bad length; the stream is then
    unusable (there is no way to resynchronise)."""

    __slots__ = ("_buf", "_max_body", "_failed")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 5:
            raise ValueError("max_frame_size must leave room for the length prefix and a body")
        self._buf = bytearray()
        self._max_body = max_frame_size - 4
        self._failed: FrameError | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._failed:
            raise self._failed
        buf = self._buf
        buf += data
        out: list[bytes] = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (n,) = LENGTH.unpack_from(buf, pos)
            if n < 0 or n > self._max_body:
                what = "negative" if n < 0 else f"over the {self._max_body + 4}-byte frame limit"
                self._failed = FrameError(f"frame length {n} is {what}")
                raise self._failed
            if end - pos - 4 < n:
                break
            out.append(bytes(buf[pos + 4 : pos + 4 + n]))
            pos += 4 + n
        if pos:
            del buf[:pos]
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)


def frame(body: bytes) -> bytes:
    return LENGTH.pack(len(body)) + body


# ----- replies ------------------------------------------------------------------------------------
@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~2 µs a reply; nobody mutates one
class Reply:
    """A decoded Response: header fields, the effective status and the operation's sub-message.

    `status` is the effective status (spec §3.2: the top-level one unless it is EOK, then the
    sub-response's). It is None when the bookie sent a status value this client does not know (kept
    in `raw_status`) or when EOK came without the sub-response.
    """

    txn_id: int
    op: Op
    status: Status | None
    raw_status: int | None
    sub: Any  # the op's response sub-message, or None
    problem: str | None = None  # why the reply cannot be trusted for its request (not fatal)


# Enum members by value: a dict lookup, not an Enum call (~1 µs each, three per reply). Values outside
# them still go through the Enum call, which raises as before.
_OP: dict[int, Op] = {o.value: o for o in Op}
_STATUS: dict[int, Status] = {s.value: s for s in Status}

# Unknown-field bytes a reply without a known status may carry for us to look for an unknown status
# value in them. Materialising unknown fields costs Python objects per field: a 5 MiB frame of them
# took 7 s of the event loop and 190 MiB, so more than this is a protocol error, never looked at.
MAX_UNKNOWN_FIELD_BYTES = 4096


def _unknown_field_bytes(msg: Message) -> int:
    bare = type(msg)()
    bare.CopyFrom(msg)
    bare.DiscardUnknownFields()
    return len(msg.SerializePartialToString()) - len(bare.SerializePartialToString())


def _status_of(msg: Message, field_number: int) -> tuple[Status | None, int | None, bool]:
    """(known status, raw value, present). An unknown enum value is kept by protobuf as an unknown
    field rather than raising; that is 'present but unknown', distinct from 'missing'."""
    if msg.HasField("status"):
        value = msg.status
        # Not `_STATUS.get(value) or Status(value)`: EOK is 0, a falsy IntEnum member, so that took the
        # Enum call for every successful reply.
        return _STATUS[value] if value in _STATUS else Status(value), value, True
    extra = _unknown_field_bytes(msg)
    if extra > MAX_UNKNOWN_FIELD_BYTES:
        raise ProtocolError(f"reply has no known status and {extra} bytes of unknown fields")
    for f in UnknownFieldSet(msg):
        if f.field_number == field_number and f.wire_type == 0:
            raw = f.data
            return None, raw, True
    return None, None, False


def decode_response(body: bytes) -> Reply:
    """Parse one frame body as a v3 Response.

    Raises ProtocolError for anything that makes the connection untrustworthy: bytes that are not a
    Response, a header missing a field (we could not even tell which request it answers), a version
    other than 3, a missing status, or a sub-response missing required fields. Returns a Reply with
    `status=None` and a `problem` for replies that are well-formed but unusable (unknown status value,
    EOK without the sub-response).
    """
    listed = _listed_reply(body)
    if listed is not None:
        return listed
    resp = pb.Response()
    try:
        resp.ParseFromString(body)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ProtocolError(f"reply is not a v3 Response ({exc.__class__.__name__}: {exc})") from None
    if not resp.HasField("header"):
        raise ProtocolError("reply has no header")
    h = resp.header
    if not (h.HasField("version") and h.HasField("operation") and h.HasField("txnId")):
        raise ProtocolError("reply header misses version, operation or txnId (or has unknown values)")
    if h.version != pb.VERSION_THREE:
        raise ProtocolError(f"reply has protocol version {h.version}, not 3")
    op = _OP[h.operation] if h.operation in _OP else Op(h.operation)
    top, top_raw, top_present = _status_of(resp, 2)
    if not top_present:
        raise ProtocolError(f"reply to txn {h.txnId} ({op.name}) has no status")

    field = _RESPONSE_FIELD.get(op)
    sub = getattr(resp, field) if field and resp.HasField(field) else None
    sub_status: Status | None = None
    sub_raw: int | None = None
    if sub is not None:
        sub_status, sub_raw, sub_present = _status_of(sub, 1) if op not in _NO_SUB_STATUS else (None, None, True)
        if not sub_present:
            raise ProtocolError(f"{op.name} reply to txn {h.txnId} has a {field} without status")
        missing = [name for name in _RESPONSE_REQUIRED[op] if not sub.HasField(name)]
        if missing:
            raise ProtocolError(f"{op.name} reply to txn {h.txnId} misses required {field} fields {missing}")

    if top is None:
        return Reply(h.txnId, op, None, top_raw, sub, f"unknown status value {top_raw}")
    if top is not Status.EOK:
        if sub is not None and op not in _NO_SUB_STATUS and sub_raw != top_raw:
            # Bookies set both to the same value on every error path that has a sub-response.
            return Reply(
                h.txnId, op, None, top_raw, sub, f"status {top.name} but {field} status {sub_raw}: contradictory reply"
            )
        return Reply(h.txnId, op, top, top_raw, sub)
    if sub is None:
        return Reply(h.txnId, op, None, top_raw, None, f"EOK without {field}")
    if op in _NO_SUB_STATUS:
        return Reply(h.txnId, op, Status.EOK, top_raw, sub)
    if sub_status is None:
        return Reply(h.txnId, op, None, sub_raw, sub, f"unknown {field} status value {sub_raw}")
    return Reply(h.txnId, op, sub_status, sub_raw, sub)


class ListedEntries:
    """The getListOfEntriesOfLedgerResponse of a reply `_listed_reply` recognised: the fields the client
    reads of the protobuf message (same names), read from the bytes without building the message."""

    __slots__ = ("status", "ledgerId", "availabilityOfEntriesOfLedger")

    def __init__(self, ledger_id: int, entries: bytes) -> None:
        self.status = pb.EOK
        self.ledgerId = ledger_id
        self.availabilityOfEntriesOfLedger = entries

    def HasField(self, name: str) -> bool:  # named as the protobuf message's method
        return name in _LISTED_FIELDS


_LISTED_FIELDS = frozenset(ListedEntries.__slots__)
_LIST_RESPONSE_FIELDS = pb.GetListOfEntriesOfLedgerResponse.DESCRIPTOR.fields_by_name
# A GET_LIST reply that found the ledger, as BookKeeper writes it (every field once, in field order): the
# header (version 3, the operation, txnId), status EOK, then the sub-response: status EOK, ledgerId and
# the list's bytes. The parts between the varint values:
_LISTED_HEADER_KEY = _key(pb.Response.DESCRIPTOR.fields_by_name["header"].number, _LEN)[0]
_LISTED_MIDDLE = (
    _key(pb.Response.DESCRIPTOR.fields_by_name["status"].number, _VARINT)
    + _varint(pb.EOK)
    + _key(pb.Response.DESCRIPTOR.fields_by_name[_RESPONSE_FIELD[Op.GET_LIST_OF_ENTRIES_OF_LEDGER]].number, _LEN)
)
_LISTED_SUB = (
    _key(_LIST_RESPONSE_FIELDS["status"].number, _VARINT)
    + _varint(pb.EOK)
    + _key(_LIST_RESPONSE_FIELDS["ledgerId"].number, _VARINT)
)
_LISTED_ENTRIES_KEY = _key(_LIST_RESPONSE_FIELDS["availabilityOfEntriesOfLedger"].number, _LEN)[0]
_MAX_ID = (1 << 63) - 1  # larger varints read differently as int64 and uint64: left to protobuf


def _listed_reply(body: bytes) -> Reply | None:
    """`decode_response(body)` when `body` is a GET_LIST reply that found the ledger, exactly as a
    bookie writes one (`ListedEntries` as its sub-response); None for any other bytes, which protobuf
    then parses. It only recognises: whatever it returns is what the general parse gives for the same
    bytes (tests/unit/bookie/test_listed_reply.py holds it to that)."""
    n = len(body)
    if n < 3 or body[0] != _LISTED_HEADER_KEY or body[1] >= 0x80 or not body.startswith(_LIST_HEADER, 2):
        return None  # (a header of at most 127 bytes: its length is one byte)
    try:
        txn, pos = _decode_varint(body, 2 + len(_LIST_HEADER))
        if pos != 2 + body[1] or not body.startswith(_LISTED_MIDDLE, pos):
            return None
        size, pos = _decode_varint(body, pos + len(_LISTED_MIDDLE))
        if pos + size != n or not body.startswith(_LISTED_SUB, pos):
            return None
        ledger_id, pos = _decode_varint(body, pos + len(_LISTED_SUB))
        if pos >= n or body[pos] != _LISTED_ENTRIES_KEY:
            return None
        size, pos = _decode_varint(body, pos + 1)
    except VarintError:  # a varint runs off the end, or on past ten bytes
        return None
    if pos + size != n or txn > _MAX_ID or ledger_id > _MAX_ID:
        return None
    return Reply(txn, Op.GET_LIST_OF_ENTRIES_OF_LEDGER, Status.EOK, pb.EOK, ListedEntries(ledger_id, body[pos:]))


_check_gated_frames()
