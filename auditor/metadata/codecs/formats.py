"""Codecs for BookKeeper's znode payloads (spec §3, §4, §5). Pure: bytes in, model out, and back.

One module on purpose (just over 600 lines): metadata v1/v2/v3, cookies, markers and locks share one
set of field rules and one error wording, and the property tests drive them together.

Every parse failure is a CorruptZnodeError naming the znode path and the problem; nothing else
escapes (fuzzed input included).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar, cast

from google.protobuf import text_format
from google.protobuf.message import DecodeError, Message

from auditor._proto import bookkeeper_formats_pb2 as pb
from auditor.durability import varint
from auditor.durability.ids import LedgerId
from auditor.durability.javatext import JAVA_TRIM, java_int, java_split, shown
from auditor.durability.model import DigestType, LedgerMetadata, LedgerState, Segment
from auditor.metadata.errors import CorruptZnodeError

# protobuf ships no types (to mypy its messages are Any): what its calls answer is cast to what protobuf
# documents them to answer (SerializeToString and text_format's MessageToString: bytes and str).
_Msg = TypeVar("_Msg", bound=Message)

HEADER_KEY = b"BookieMetadataFormatVersion\t"
_MAX_VERSION_DIGITS = 10
_V3_HEADER = HEADER_KEY + b"3\n"
SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)
V1_IN_RECOVERY = -102
V1_CLOSED = "CLOSED"
# Java's BookieId rule; String.matches() must match the whole id (a trailing newline included).
_BOOKIE_ID = re.compile(r"[a-zA-Z0-9:-_.\-]+")
_LMF = pb.LedgerMetadataFormat


def is_valid_bookie_id(text: str) -> bool:
    """Java's BookieId rule: ASCII letters, digits, ':'..'_', '.', '-'; never 'readonly'."""
    return bool(_BOOKIE_ID.fullmatch(text)) and text.lower() != "readonly"


# ---------------------------------------------------------------- the length prefix of Java's writeDelimitedTo


def _decode_varint32(data: bytes, pos: int, path: str) -> tuple[int, int]:
    try:
        result, end = varint.decode(data, pos)
    except varint.VarintTruncated:
        raise CorruptZnodeError(path, "truncated length prefix of the metadata message") from None
    except varint.VarintError:
        raise CorruptZnodeError(path, "malformed varint length prefix") from None
    # Like protobuf-java's readRawVarint32, keep the low 32 bits; a "negative" size is corrupt.
    result &= 0xFFFFFFFF
    if result >= 2**31:
        raise CorruptZnodeError(path, f"negative message length {result - 2**32}")
    return result, end


# ---------------------------------------------------------------- ledger metadata


def read_header(data: bytes, path: str) -> tuple[int, int]:
    """(format version, offset of the body)."""
    if data.startswith(_V3_HEADER):  # what every current BookKeeper writes: nothing to parse
        return 3, len(_V3_HEADER)
    if not data.startswith(HEADER_KEY):
        raise CorruptZnodeError(
            path,
            "missing 'BookieMetadataFormatVersion<TAB>' header"
            if len(data) >= len(HEADER_KEY) or not HEADER_KEY.startswith(data)
            else "truncated header",
        )
    pos = len(HEADER_KEY)
    end = data.find(b"\n", pos, pos + _MAX_VERSION_DIGITS + 1)
    if end < 0:
        raise CorruptZnodeError(path, "cannot find the end of the metadata format version")
    raw = data[pos:end]
    try:
        version = java_int(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise CorruptZnodeError(path, f"metadata format version {raw[:12]!r} is not a number") from None
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise CorruptZnodeError(path, f"metadata format version {version} is not supported (1, 2 or 3)")
    return version, end + 1


def parse_ledger_metadata(
    data: bytes, ledger_id: LedgerId | int, path: str = "<ledger metadata>", version: int | None = None
) -> LedgerMetadata:
    """Decode a ledger znode's content (format v1, v2 or v3) as Java's LedgerMetadataSerDe reads it.

    As in Java: an absent ack quorum equals the write quorum; digest type and password are set only when
    the password field is present; last entry id and length are kept only for CLOSED ledgers (-1 and 0
    otherwise); `ctime` is None when not stored (callers may fall back to the znode's ctime).
    """
    lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
    fmt, body = read_header(data, path)
    if fmt == 1:
        md = _parse_v1(data[body:], lid, path, version)
    else:
        msg = _LMF()
        if fmt == 3:
            size, start = _decode_varint32(data, body, path)
            if start + size > len(data):
                raise CorruptZnodeError(path, f"metadata message is truncated: {len(data) - start} of {size} bytes")
            _parse_binary(msg, data[start : start + size], path)  # Java ignores trailing bytes
        else:
            try:
                text_format.Parse(data[body:].decode("utf-8"), msg)
            except (text_format.ParseError, UnicodeDecodeError, ValueError, RecursionError) as exc:
                raise CorruptZnodeError(path, f"bad text metadata (format 2): {exc}") from None
            _require_initialized(msg, path)
        md = _from_proto(msg, lid, fmt, path, version)
    validate(md, path)
    return md


def _parse_binary(msg: Message, raw: bytes, path: str) -> None:
    try:
        msg.ParseFromString(raw)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise CorruptZnodeError(path, f"bad {type(msg).__name__} protobuf: {exc}") from None
    _require_initialized(msg, path)


def _require_initialized(msg: Message, path: str) -> None:
    missing = msg.FindInitializationErrors()
    if missing:
        raise CorruptZnodeError(path, f"{type(msg).__name__} lacks required field(s) {', '.join(missing)}")


def _str(value: str | bytes) -> str:
    # protobuf hands back bytes for a proto2 string that is not valid UTF-8; Java decodes it with
    # replacement characters, which we do too (a bookie id then fails validation, as in Java).
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


# Ensembles seen, each kept once: a cluster's ledgers share a few thousand ensembles at most, so the scan
# and the daemon's index hold one tuple per distinct ensemble instead of one per ledger, and validate each
# once. Bounded: cleared when full (the cost is then re-validating, never a wrong answer).
_ENSEMBLES: dict[tuple[str, ...], tuple[str, ...]] = {}
_VALID_ENSEMBLES: dict[tuple[str, ...], None] = {}
_ENSEMBLE_CACHE_LIMIT = 65_536


def _remember(cache: dict[tuple[str, ...], Any], ensemble: tuple[str, ...], value: Any = None) -> None:
    if len(cache) >= _ENSEMBLE_CACHE_LIMIT:
        cache.clear()
    cache[ensemble] = value


def _ensemble(members: Iterable[str | bytes]) -> tuple[str, ...]:
    """An ensemble's member ids as one shared tuple (see _ENSEMBLES)."""
    raw = tuple(members)
    ensemble = tuple(_str(b) for b in raw) if bytes in map(type, raw) else cast("tuple[str, ...]", raw)
    shared = _ENSEMBLES.get(ensemble)
    if shared is None:
        _remember(_ENSEMBLES, ensemble, ensemble)
        return ensemble
    return shared


# Members by value: a dict lookup per ledger instead of an Enum call (about a microsecond each).
_STATES: dict[int, LedgerState] = {s.value: s for s in LedgerState}
_DIGESTS: dict[int, DigestType] = {d.value: d for d in DigestType}


def _from_proto(
    msg: pb.LedgerMetadataFormat, lid: LedgerId, fmt: int, path: str, version: int | None
) -> LedgerMetadata:
    state = _STATES.get(msg.state)
    if state is None:
        raise CorruptZnodeError(path, f"unknown ledger state {msg.state}")
    closed = state is LedgerState.CLOSED
    if msg.HasField("password"):
        digest: DigestType | None = (
            _DIGESTS[msg.digestType] if msg.digestType in _DIGESTS else DigestType(msg.digestType)
        )
        password: bytes | None = bytes(msg.password)
    else:
        digest, password = None, None
    custom = {}
    for e in msg.customMetadata:
        custom[_str(e.key)] = bytes(e.value)  # like Java's toMap: keys are unique in practice
    if len(custom) != len(msg.customMetadata):
        raise CorruptZnodeError(path, "duplicate custom metadata key")  # Java's toMap would throw too
    return LedgerMetadata(
        ledger_id=lid,
        ensemble_size=msg.ensembleSize,
        write_quorum=msg.quorumSize,
        ack_quorum=msg.ackQuorumSize if msg.HasField("ackQuorumSize") else msg.quorumSize,
        state=state,
        last_entry_id=msg.lastEntryId if closed else -1,
        length=msg.length if closed else 0,
        segments=tuple(Segment(s.firstEntryId, _ensemble(s.ensembleMember)) for s in msg.segment),
        digest_type=digest,
        password=password,
        custom_metadata=MappingProxyType(custom),
        ctime=msg.ctime if msg.HasField("ctime") else None,
        creator_token=msg.cToken if msg.HasField("cToken") else None,
        format_version=fmt,
        version=version,
    )


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what Java's BufferedReader.readLine() splits on


def _parse_v1(body: bytes, lid: LedgerId, path: str, version: int | None) -> LedgerMetadata:
    """Format 1, read as Java's parseVersion1Config reads it: three numbers (write quorum, ensemble size,
    length), then `<first entry>\t<bookie>...` per segment, ended by `<last entry>\tCLOSED` (-102: in
    recovery). Numbers are Java ints/longs (see auditor.durability.javatext); lines after CLOSED are
    ignored, as Java ignores them."""
    try:
        lines = _LINE_BREAK.split(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CorruptZnodeError(path, f"format 1 metadata is not UTF-8 ({exc})") from None
    if lines and lines[-1] == "":
        lines.pop()

    def number(text: str, what: str, bits: int) -> int:
        try:
            return java_int(text, bits)
        except ValueError as exc:
            raise CorruptZnodeError(path, f"format 1 {what}: {exc}") from None

    if len(lines) < 3:
        raise CorruptZnodeError(path, "format 1 metadata lacks the quorum/ensemble/length lines")
    quorum = number(lines[0], "write quorum", 32)
    ensemble = number(lines[1], "ensemble size", 32)
    length = number(lines[2], "length", 64)
    state, last = LedgerState.OPEN, -1
    segments = []
    for line in lines[3:]:
        parts = java_split(line, "\t")
        if len(parts) < 2:
            raise CorruptZnodeError(path, f"format 1 line {shown(line, 80)} has no TAB-separated fields")
        first = number(parts[0], "entry id", 64)
        if parts[1] == V1_CLOSED:
            state, last = (LedgerState.IN_RECOVERY, -1) if first == V1_IN_RECOVERY else (LedgerState.CLOSED, first)
            break
        segments.append(Segment(first, tuple(parts[1:])))
    return LedgerMetadata(
        ledger_id=lid,
        ensemble_size=ensemble,
        write_quorum=quorum,
        ack_quorum=quorum,
        state=state,
        last_entry_id=last,
        length=length if state is LedgerState.CLOSED else 0,
        segments=tuple(segments),
        format_version=1,
        version=version,
    )


def validate(md: LedgerMetadata, path: str = "<ledger metadata>") -> None:
    """The invariants every ledger a BookKeeper client writes keeps; CorruptZnodeError if one is broken.

    Java's own checks (LedgerMetadataBuilder / LedgerMetadataImpl) are only: at least one ensemble, each
    of the ensemble size, first entry ids increasing, E >= W >= A, valid bookie ids, digest type and
    password together. We also refuse what no Java writer produces and what would make the audit itself
    wrong (docs/spec-differences.md): quorums below 1, a first ensemble not at entry 0, a closed ledger
    whose last entry id is below -1 or whose length is negative, a bookie twice in one ensemble.
    """

    def bad(problem: str) -> CorruptZnodeError:
        return CorruptZnodeError(path, problem)

    if not md.segments:
        raise bad("no ensemble (segment) at all")
    if not md.ensemble_size >= md.write_quorum >= md.ack_quorum:
        raise bad(f"quorums out of order: E={md.ensemble_size} W={md.write_quorum} A={md.ack_quorum}")
    if md.ack_quorum < 1:
        raise bad(f"ack quorum {md.ack_quorum} < 1")
    if md.is_closed and md.last_entry_id < -1:
        raise bad(f"closed ledger with last entry id {md.last_entry_id} (below -1)")
    if md.is_closed and md.length < 0:
        raise bad(f"closed ledger with negative length {md.length}")
    if md.segments[0].first_entry_id != 0:
        raise bad(f"first ensemble starts at entry {md.segments[0].first_entry_id}, not 0")
    prev = None
    for seg in md.segments:
        if len(seg.ensemble) != md.ensemble_size:
            raise bad(
                f"segment at entry {seg.first_entry_id} has {len(seg.ensemble)} bookies, "
                f"ensemble size is {md.ensemble_size}"
            )
        if prev is not None and seg.first_entry_id <= prev:
            raise bad(f"segment first entry ids do not increase ({prev} then {seg.first_entry_id})")
        prev = seg.first_entry_id
        if seg.ensemble in _VALID_ENSEMBLES:
            continue
        for b in seg.ensemble:
            if not is_valid_bookie_id(b):
                raise bad(f"invalid bookie id {shown(b, 80)} in segment at entry {seg.first_entry_id}")
        if len(set(seg.ensemble)) != len(seg.ensemble):
            twice = sorted({b for b in seg.ensemble if seg.ensemble.count(b) > 1})
            raise bad(f"bookie {twice[0]} appears twice in the ensemble at entry {seg.first_entry_id}")
        _remember(_VALID_ENSEMBLES, seg.ensemble)
    if (md.digest_type is None) != (md.password is None):
        raise bad("digest type and password must be set together")


def _to_proto(md: LedgerMetadata) -> pb.LedgerMetadataFormat:
    msg = _LMF(
        quorumSize=md.write_quorum,
        ensembleSize=md.ensemble_size,
        length=md.length,
        lastEntryId=md.last_entry_id,
        state=cast("pb.LedgerMetadataFormat.State", md.state.value),
        ackQuorumSize=md.ack_quorum,
    )
    for seg in md.segments:
        msg.segment.add(ensembleMember=list(seg.ensemble), firstEntryId=seg.first_entry_id)
    # Java always writes digest type and password (empty when none).
    msg.digestType = cast("pb.LedgerMetadataFormat.DigestType", (md.digest_type or DigestType.CRC32).value)
    msg.password = md.password or b""
    if md.ctime is not None:
        msg.ctime = md.ctime
    for key, value in md.custom_metadata.items():
        msg.customMetadata.add(key=key, value=bytes(value))
    return msg


def serialize_ledger_metadata(md: LedgerMetadata, format_version: int | None = None) -> bytes:
    """Encode as Java's LedgerMetadataSerDe would (default: the metadata's own format version).

    v3: the header then one length-delimited binary message, fields in number order (protobuf does
    that), `lastEntryId`/`digestType`/`password`/`cToken` always present, `ctime` only if set.
    Open ledgers get length 0 and lastEntryId -1, as Java writes them.
    """
    fmt = format_version or md.format_version
    validate(md, f"ledger {md.ledger_id}")
    if md.digest_type is None and fmt != 1:
        # Java cannot build such metadata either (a writer always has a digest type and password).
        raise ValueError(f"ledger {md.ledger_id}: digest type and password are required for format {fmt}")
    if not md.is_closed:
        md = _open_view(md)
    header = HEADER_KEY + str(fmt).encode() + b"\n"
    if fmt == 3:
        msg = _to_proto(md)
        msg.cToken = md.creator_token or 0
        body = _binary(msg)
        return header + varint.encode(len(body)) + body
    if fmt == 2:
        # The v2 writer never emits cToken.
        return header + _text(_to_proto(md))
    if fmt == 1:
        if any(s.ensemble[0] == V1_CLOSED for s in md.segments):
            # `<first>\tCLOSED` is the close line: such an ensemble reads back (in Java too) as a close.
            raise ValueError(
                f"ledger {md.ledger_id}: a bookie named {V1_CLOSED} first in an ensemble cannot be written in format 1"
            )
        lines = [str(md.write_quorum), str(md.ensemble_size), str(md.length)]
        lines += ["\t".join([str(s.first_entry_id), *s.ensemble]) for s in md.segments]
        if md.state is LedgerState.IN_RECOVERY:
            lines.append(f"{V1_IN_RECOVERY}\t{V1_CLOSED}")
        elif md.is_closed:
            lines.append(f"{md.last_entry_id}\t{V1_CLOSED}")
        return header + "\n".join(lines).encode("utf-8")
    raise ValueError(f"unsupported metadata format version {fmt}")


def _open_view(md: LedgerMetadata) -> LedgerMetadata:
    from dataclasses import replace

    return replace(md, last_entry_id=-1, length=0)


# ---------------------------------------------------------------- text-format helpers


def _parse_text(msg: _Msg, data: bytes, path: str) -> _Msg:
    try:
        text_format.Parse(data.decode("utf-8"), msg)
    except (text_format.ParseError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptZnodeError(path, f"bad {type(msg).__name__} text: {exc}") from None
    _require_initialized(msg, path)
    return msg


def _text(msg: Message) -> bytes:
    """Java's Message.toString(): text format, one field per line, trailing newline."""
    return cast(str, text_format.MessageToString(msg)).encode("utf-8")


def _binary(msg: Message) -> bytes:
    """The message in protobuf's binary form."""
    return cast(bytes, msg.SerializeToString())


# ---------------------------------------------------------------- under-replication markers & co.


@dataclass(frozen=True, slots=True)
class UnderreplicatedLedger:
    replicas: tuple[str, ...]
    ctime: int  # ms since the epoch; -1 when the marker has none (as Java reports it)


def parse_marker(data: bytes, path: str) -> UnderreplicatedLedger:
    msg = _parse_text(pb.UnderreplicatedLedgerFormat(), data, path)
    return UnderreplicatedLedger(tuple(_str(r) for r in msg.replica), msg.ctime if msg.HasField("ctime") else -1)


def serialize_marker(replicas: Iterable[str], ctime: int | None) -> bytes:
    msg = pb.UnderreplicatedLedgerFormat(replica=list(replicas))
    if ctime is not None:
        msg.ctime = ctime
    return _text(msg)


UR_LAYOUT_TYPE = "BASIC"
UR_LAYOUT_VERSION = 1


def serialize_ur_layout() -> bytes:
    return _text(pb.LedgerRereplicationLayoutFormat(type=UR_LAYOUT_TYPE, version=UR_LAYOUT_VERSION))


def check_ur_layout(data: bytes, path: str) -> None:
    msg = _parse_text(pb.LedgerRereplicationLayoutFormat(), data, path)
    if msg.type != UR_LAYOUT_TYPE or msg.version != UR_LAYOUT_VERSION:
        raise CorruptZnodeError(
            path,
            f"incompatible under-replication layout {msg.type}/{msg.version} "
            f"(expected {UR_LAYOUT_TYPE}/{UR_LAYOUT_VERSION})",
        )


def parse_lock(data: bytes, path: str) -> str:
    """A worker lock's holder (Java writes the worker host name)."""
    return _parse_text(pb.LockDataFormat(), data, path).bookieId


def serialize_lock(holder: str) -> bytes:
    """A worker lock's data as Java's getLockData writes it: `bookieId: "<holder>"` in text format."""
    return _text(pb.LockDataFormat(bookieId=holder))


def serialize_vote(bookie_id: str) -> bytes:
    return _text(pb.AuditorVoteFormat(bookieId=bookie_id))


def parse_vote(data: bytes, path: str) -> str:
    return _parse_text(pb.AuditorVoteFormat(), data, path).bookieId


# Check-time znodes: binary protos holding one int64 each.
CTIME_MESSAGES: dict[str, tuple[type[Message], str]] = {
    "checkallledgersctime": (pb.CheckAllLedgersFormat, "checkAllLedgersCTime"),
    "placementpolicycheckctime": (pb.PlacementPolicyCheckFormat, "placementPolicyCheckCTime"),
    "replicascheckctime": (pb.ReplicasCheckFormat, "replicasCheckCTime"),
}


def parse_check_ctime(name: str, data: bytes, path: str) -> int | None:
    cls, field = CTIME_MESSAGES[name]
    msg = cls()
    _parse_binary(msg, data, path)
    return getattr(msg, field) if msg.HasField(field) else None


def serialize_check_ctime(name: str, ctime_ms: int) -> bytes:
    cls, field = CTIME_MESSAGES[name]
    return _binary(cls(**{field: ctime_ms}))


def parse_lost_bookie_recovery_delay(data: bytes, path: str) -> int:
    """Seconds, as Java's Integer.parseInt reads them (no surrounding spaces or newline)."""
    try:
        return java_int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise CorruptZnodeError(path, f"not a decimal number of seconds: {data[:40]!r}") from None


# ---------------------------------------------------------------- bookies


@dataclass(frozen=True, slots=True)
class Endpoint:
    id: str
    host: str
    port: int
    protocol: str
    auth: tuple[str, ...] = ()
    extensions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BookieServiceInfo:
    endpoints: tuple[Endpoint, ...]
    properties: MappingProxyType[str, str]

    @property
    def rpc_endpoint(self) -> Endpoint | None:
        return next((e for e in self.endpoints if e.protocol == "bookie-rpc"), None)


def parse_bookie_service_info(data: bytes, path: str) -> BookieServiceInfo | None:
    """None for empty data (bookies before 4.11 register with no data)."""
    if not data:
        return None
    msg = pb.BookieServiceInfoFormat()
    _parse_binary(msg, data, path)
    eps = tuple(
        Endpoint(
            _str(e.id), _str(e.host), e.port, _str(e.protocol), tuple(map(_str, e.auth)), tuple(map(_str, e.extensions))
        )
        for e in msg.endpoints
    )
    try:
        # protobuf decodes map keys only when they are read (and then raises on bad UTF-8, unlike strings).
        properties = {_str(k): _str(v) for k, v in msg.properties.items()}
    except UnicodeDecodeError:
        raise CorruptZnodeError(path, "a registration property is not UTF-8") from None
    return BookieServiceInfo(eps, MappingProxyType(properties))


def serialize_bookie_service_info(info: BookieServiceInfo) -> bytes:
    msg = pb.BookieServiceInfoFormat(properties=dict(info.properties))
    for e in info.endpoints:
        msg.endpoints.add(
            id=e.id, host=e.host, port=e.port, protocol=e.protocol, auth=list(e.auth), extensions=list(e.extensions)
        )
    return _binary(msg)


_HOST_PORT = re.compile(r"(?:\[([0-9A-Fa-f:.]+)\]|([^:\[\]\s]+)):([0-9]{1,5})")


def parse_host_port(bookie_id: str) -> tuple[str, int] | None:
    """`host:port` from a bookie id, or None when the id is not of that shape (a custom id)."""
    m = _HOST_PORT.fullmatch(bookie_id)
    if not m:
        return None
    port = int(m.group(3))
    if not 0 < port < 65536:
        return None
    return (m.group(1) or m.group(2)), port


@dataclass(frozen=True, slots=True)
class Cookie:
    layout_version: int
    bookie_id: str
    journal_dirs: str
    ledger_dirs: str
    instance_id: str | None = None
    index_dirs: str | None = None

    @staticmethod
    def split_dirs(encoded: str) -> list[str]:
        """`<count>\\t<dir>\\t<dir>...` -> dirs (ledgerDirs / indexDirs encoding)."""
        parts = encoded.split("\t")
        return parts[1:] if parts and re.fullmatch("[0-9]+", parts[0]) else parts


def parse_cookie(data: bytes, path: str) -> Cookie:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptZnodeError(path, f"cookie is not UTF-8 ({exc})") from None
    first, _, rest = text.partition("\n")
    try:
        layout = java_int(first.strip(JAVA_TRIM))
    except ValueError:
        raise CorruptZnodeError(path, f"cookie layout version {shown(first)} is not a number") from None
    if layout == 3:
        lines = _LINE_BREAK.split(rest)
        if len(lines) < 3:
            raise CorruptZnodeError(path, "layout 3 cookie needs 3 lines after the version")
        return Cookie(3, lines[0], lines[1], lines[2])
    if layout < 3:
        raise CorruptZnodeError(path, f"cookie layout version {layout} is not supported")
    msg = _parse_text(pb.CookieFormat(), rest.encode("utf-8"), path)
    return Cookie(layout, msg.bookieHost, msg.journalDir, msg.ledgerDirs, msg.instanceId or None, msg.indexDirs or None)


def serialize_cookie(cookie: Cookie) -> bytes:
    """As Java's Cookie.toString(): layout 3 as three plain lines, later layouts as a text proto."""
    if cookie.layout_version <= 3:
        return f"{cookie.layout_version}\n{cookie.bookie_id}\n{cookie.journal_dirs}\n{cookie.ledger_dirs}\n".encode()
    msg = pb.CookieFormat(bookieHost=cookie.bookie_id, journalDir=cookie.journal_dirs, ledgerDirs=cookie.ledger_dirs)
    if cookie.instance_id is not None:
        msg.instanceId = cookie.instance_id
    if cookie.index_dirs is not None:
        msg.indexDirs = cookie.index_dirs
    return f"{cookie.layout_version}\n".encode() + _text(msg)


def merge_replicas(existing: Sequence[str], new: Iterable[str]) -> tuple[list[str], bool]:
    """Java's merge: keep the existing order, append only replicas not yet listed. (list, changed)."""
    out = list(existing)
    changed = False
    for r in new:
        if r not in out:
            out.append(r)
            changed = True
    return out, changed
