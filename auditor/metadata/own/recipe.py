"""One recipe for bk-auditor's own documents in ZooKeeper (`<root>/bk-auditor/...`): check cursors and
times, the references check's seen ledgers, the repair role's blocked-ledger records and run-time
limits, the bookie watch's incarnations.

As kazoo's recipes take the client, `OwnDocument` (one document at a fixed path) and `OwnDirectory`
(documents of one kind under one directory, one per key) take the store that holds our own subtree
(store.py, offering `own.znodes.OwnZnodes`) and a `DocumentSchema`: how the document is parsed
(strictly: anything but what we write is `CorruptZnodeError` naming the znode) and serialised. Reads
never create anything; every write and delete is guarded by the guard its caller passes (the leader's
vote, or a repair lock's `ProvingGuard`), exactly as the store's own `put` and `delete_own` are.

What a corrupt document costs is decided here, once (`OwnDocument.get_or_replace`): it is ours, so
ours to repair: log it, count it, replace it with a fresh state.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from posixpath import join
from typing import Any, Generic, Protocol, TypeVar

from kazoo.exceptions import KazooException

from auditor.durability.ids import LedgerId
from auditor.metadata.errors import CorruptZnodeError, MetadataError
from auditor.metadata.interfaces import WriteGuard

T = TypeVar("T")
K = TypeVar("K")

MAX_MILLIS = 2**63 - 1  # a Java long, as System.currentTimeMillis() gives

# The one line a replaced document is reported with (the daemon's check states, the bookie watch's state).
REPLACED_EVENT = "bk-auditor state is corrupt: replacing it with a fresh state"


def parse_own_json(data: bytes, path: str, what: str) -> Any:
    """The JSON document in one of our own znodes; CorruptZnodeError naming `path` for anything that is
    not UTF-8 JSON (including nesting too deep to parse)."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise CorruptZnodeError(path, f"{what} is not UTF-8 text") from None
    except ValueError as exc:
        raise CorruptZnodeError(path, f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise CorruptZnodeError(path, f"{what} is not valid JSON: nested too deeply") from None


def short_repr(value: Any) -> str:
    """A value of a bad document as an error names it: its repr, cut at 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_own_cursor(doc: dict[str, Any], path: str, what: str) -> LedgerId | None:
    """The `cursor` of one of our documents (a ledger's qualified name, or null); CorruptZnodeError naming
    `path` for anything else."""
    cursor = doc.get("cursor")
    if cursor is None:
        return None
    if not isinstance(cursor, str):
        raise CorruptZnodeError(path, f"{what}: cursor is not a ledger id: {short_repr(cursor)}")
    try:
        return LedgerId.parse(cursor)
    except ValueError as exc:  # LedgerIdError, or a number too long for int()
        raise CorruptZnodeError(path, f"{what}: cursor is not a ledger id: {exc}") from None


class OwnZnodeStore(Protocol):
    """What the recipe needs of the store: our own subtree's primitives (`own.znodes.OwnZnodes`)."""

    @property
    def own_subtree(self) -> str: ...

    async def read_own(self, path: str) -> bytes | None: ...

    async def put(self, path: str, data: bytes, guard: WriteGuard) -> None: ...

    async def delete_own(self, path: str, guard: WriteGuard) -> bool: ...

    async def own_children(self, path: str) -> list[str]: ...


class WarningLog(Protocol):
    """The caller's logger (its name is the caller's, as the log lines have always carried)."""

    def warning(self, event: str, *args: Any, **kw: Any) -> Any: ...


@dataclass(frozen=True, slots=True)
class DocumentSchema(Generic[T]):
    """One kind of our documents: how it is read from and written to its znode."""

    what: str  # names the document in errors, e.g. "bk-auditor check state"
    parse: Callable[[bytes, str], T]  # strict: CorruptZnodeError naming the path (2nd argument)
    serialise: Callable[[T], bytes]  # may refuse (ValueError) a value that must not be written
    # An empty znode (as a missing parent is created) reads as no document, not as a corrupt one.
    empty_is_absent: bool = False
    # A read that fails for a reason of ZooKeeper's (e.g. no permission) is a MetadataError naming the
    # znode, not kazoo's exception.
    read_failure_is_metadata_error: bool = False


class OwnDocument(Generic[T]):
    """One of our own documents, at `path` (under the store's `own_subtree`)."""

    def __init__(self, store: OwnZnodeStore, path: str, schema: DocumentSchema[T]) -> None:
        self.store = store
        self.path = path
        self.schema = schema

    async def get(self) -> T | None:
        """The document, None if there is none; CorruptZnodeError if it is not one."""
        schema = self.schema
        try:
            data = await self.store.read_own(self.path)
        except KazooException as exc:
            if not schema.read_failure_is_metadata_error:
                raise
            raise MetadataError(f"{self.path}: cannot read {schema.what} ({type(exc).__name__})") from exc
        if data is None or (schema.empty_is_absent and not data):
            return None
        return schema.parse(data, self.path)

    async def put(self, value: T, guard: WriteGuard) -> None:
        """Guarded set-or-create of the document (missing parents created, each guarded)."""
        await self.store.put(self.path, self.schema.serialise(value), guard)

    async def delete(self, guard: WriteGuard) -> bool:
        """Guarded delete of the document; False if it was already gone."""
        return await self.store.delete_own(self.path, guard)

    async def get_or_replace(
        self,
        fresh: T,
        *,
        log: WarningLog,
        count: Callable[[CorruptZnodeError], None],
        replace: Callable[[T], Awaitable[None]] | None = None,
        **context: Any,
    ) -> T:
        """The document, or `fresh` when there is none. A corrupt one is ours to repair: logged (on `log`,
        with `context` first), counted (`count`), replaced by `fresh` (`replace(fresh)` when given; without
        it, the caller's next write replaces it) and `fresh` returned."""
        try:
            got = await self.get()
        except CorruptZnodeError as exc:
            log.warning(REPLACED_EVENT, **context, path=exc.path, problem=exc.problem)
            count(exc)
            if replace is not None:
                await replace(fresh)
            return fresh
        return fresh if got is None else got


class OwnDirectory(Generic[K, T]):
    """Our own documents of one kind under `base`, one per key, named by `name(key)`."""

    def __init__(self, store: OwnZnodeStore, base: str, schema: DocumentSchema[T], name: Callable[[K], str]) -> None:
        self.store = store
        self.base = base.rstrip("/")
        self.schema = schema
        self._name = name

    def path(self, key: K) -> str:
        return join(self.base, self._name(key))

    def document(self, key: K) -> OwnDocument[T]:
        return OwnDocument(self.store, self.path(key), self.schema)

    async def get(self, key: K) -> T | None:
        """The document of `key`, None if there is none; CorruptZnodeError if it is not one."""
        return await self.document(key).get()

    async def put(self, key: K, value: T, guard: WriteGuard) -> None:
        await self.document(key).put(value, guard)

    async def delete(self, key: K, guard: WriteGuard) -> bool:
        return await self.document(key).delete(guard)

    async def names(self) -> list[str]:
        """The names of the documents there ([] if the directory does not exist)."""
        return await self.store.own_children(self.base)
