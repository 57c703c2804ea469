"""Ledger id <-> znode path for every ZooKeeper ledger manager, plus our 128-bit extension. Spec §2.

Pure: no I/O. A digit tree is walked in one place (`_walk_digit_tree`), for both listings: the ledgers
(`walk_ledgers`) and the leaf directories (`walk_leaf_directories`). It takes an async `children(path)`
function so the adapter decides how children are fetched.

A *digit tree* is a directory tree whose path digits, concatenated, spell a fixed-width decimal number:
legacy 2-4-4 (10 digits), long 3-4-4-4-4 (19 digits), flat (one level, `L` + at least 10 digits), and
our scoped tree 3-4-4-4-4-3-4-4-4-4 (38 digits = fmt19(scope) + fmt19(ledger)) under `R/scoped`.
Only the leaf carries the `L` prefix.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from auditor.durability.ids import MAX_ID, LedgerId
from auditor.metadata.location import LedgerManager, join

# Java's Integer.MAX_VALUE: the hybrid manager uses the legacy (2-4-4) path strictly below it.
HYBRID_SPLIT = 2**31 - 1
SCOPED_DIR = "scoped"
_TEN19 = 10**19


@dataclass(frozen=True, slots=True)
class DigitTree:
    """A path scheme: `widths` of the directory levels; the last one is the leaf (prefixed `L`)."""

    name: str
    widths: tuple[int, ...]
    # Smallest/largest number (the digits' value) that belongs in this tree.
    min_value: int = 0
    max_value: int = MAX_ID
    variable_leaf: bool = False  # flat: the leaf is L + >= width digits

    # Where each directory level's digits start and end (the leaf's run to the end), worked out once: a
    # scan makes a path per ledger.
    _cuts: tuple[tuple[int, int | None], ...] = field(init=False, repr=False, compare=False)
    total: int = field(init=False, repr=False, compare=False)  # digits in all

    def __post_init__(self) -> None:
        starts = [sum(self.widths[:i]) for i in range(len(self.widths))]
        cuts = tuple((a, a + w) for a, w in zip(starts[:-1], self.widths[:-1])) + ((starts[-1], None),)
        object.__setattr__(self, "_cuts", cuts)
        object.__setattr__(self, "total", sum(self.widths))

    def to_parts(self, value: int) -> list[str]:
        total = self.total
        digits = f"{value:0{total}d}"
        if len(digits) != total and not self.variable_leaf:
            raise ValueError(f"{value} does not fit the {self.name} layout ({self.total} digits)")
        parts = [digits[a:b] for a, b in self._cuts]
        parts[-1] = "L" + parts[-1]
        return parts

    def subpath(self, value: int) -> str:
        """`to_parts(value)` joined: the path below the tree's base."""
        return "/".join(self.to_parts(value))

    def level_regex(self, depth: int) -> re.Pattern[str]:
        """A name at `depth`; use with fullmatch(). ASCII digits only: Python's \\d also matches other
        scripts' digits (`L٠٠٠٧`), which no BookKeeper writes and int() would read as a ledger id."""
        w = self.widths[depth]
        if depth == len(self.widths) - 1:
            # Flat: `L%010d`, so more than 10 digits only without a leading zero (`L00000000007` is not
            # where ledger 7 lives, though Java's Long.parseLong would read it as 7).
            return re.compile(rf"L([0-9]{{{w}}}|[1-9][0-9]{{{w},18}})" if self.variable_leaf else rf"L([0-9]{{{w}}})")
        return re.compile(rf"([0-9]{{{w}}})")

    def prefix_range(self, prefix: str) -> tuple[int, int]:
        """Values whose digits start with `prefix` (a directory's accumulated digits)."""
        rest = self.total - len(prefix)
        base = int(prefix or "0") * 10**rest
        return base, base + 10**rest - 1


LEGACY_TREE = DigitTree("legacy", (2, 4, 4), max_value=10**10 - 1)
LONG_TREE = DigitTree("long", (3, 4, 4, 4, 4))
FLAT_TREE = DigitTree("flat", (10,), variable_leaf=True)
# value = scope * 10**19 + ledger; both halves < 10**19, so ordering by value is ordering by (scope, ledger)
SCOPED_TREE = DigitTree("scoped", (3, 4, 4, 4, 4, 3, 4, 4, 4, 4), min_value=_TEN19, max_value=MAX_ID * _TEN19 + MAX_ID)


@dataclass(frozen=True, slots=True)
class TreePass:
    """One tree to walk for a manager, with the id range (inclusive) that belongs in it."""

    tree: DigitTree
    base: str  # directory holding the tree's first level
    lo: int
    hi: int


def _value(ledger_id: LedgerId) -> int:
    return ledger_id.scope * _TEN19 + ledger_id.ledger


def _from_value(value: int) -> LedgerId:
    return LedgerId(value // _TEN19, value % _TEN19)


class LedgerPaths:
    """Id <-> path for one ledgers root and manager; scope != 0 always uses the scoped extension."""

    def __init__(self, ledgers_root: str, manager: LedgerManager) -> None:
        self.root = ledgers_root.rstrip("/") or "/"
        self.manager = manager
        self.scoped_root = join(self.root, SCOPED_DIR)
        # What `join(root, *parts)` puts before the parts (digits never hold a "/").
        self._base = self.root.rstrip("/")
        self._scoped_base = self.scoped_root.rstrip("/")

    # ---- id -> path
    def path(self, ledger_id: LedgerId | int) -> str:
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        if lid.scope != 0:
            return f"{self._scoped_base}/{SCOPED_TREE.subpath(_value(lid))}"
        n = lid.ledger
        m = self.manager
        if m is LedgerManager.FLAT:
            tree = FLAT_TREE
        elif m is LedgerManager.LONG_HIERARCHICAL or (m is LedgerManager.HIERARCHICAL and n >= HYBRID_SPLIT):
            tree = LONG_TREE
        else:
            tree = LEGACY_TREE
        if n > tree.max_value:
            raise ValueError(f"ledger id {n} cannot be stored by the {m.value} ledger manager")
        return f"{self._base}/{tree.subpath(n)}"

    # ---- path -> id
    def parse(self, path: str) -> LedgerId | None:
        """The ledger id a znode path names, or None if it is not a well-formed ledger path here."""
        for p in self.passes():
            rel = _relative(path, p.base)
            if rel is None:
                continue
            parts = rel.split("/")
            if len(parts) != len(p.tree.widths):
                continue
            digits = []
            for depth, part in enumerate(parts):
                m = p.tree.level_regex(depth).fullmatch(part)
                if not m:
                    break
                digits.append(m.group(1))
            else:
                value = int("".join(digits))
                if p.lo <= value <= p.hi:
                    return _from_value(value) if p.tree is SCOPED_TREE else LedgerId(0, value)
        return None

    # ---- listing plan
    def passes(self, include_scoped: bool = True) -> list[TreePass]:
        """The trees to walk, in ascending id order."""
        m = self.manager
        out: list[TreePass] = []
        if m is LedgerManager.HIERARCHICAL:
            out += [
                TreePass(LEGACY_TREE, self.root, 0, HYBRID_SPLIT - 1),
                TreePass(LONG_TREE, self.root, HYBRID_SPLIT, MAX_ID),
            ]
        elif m is LedgerManager.LONG_HIERARCHICAL:
            out.append(TreePass(LONG_TREE, self.root, 0, MAX_ID))
        elif m is LedgerManager.LEGACY_HIERARCHICAL:
            out.append(TreePass(LEGACY_TREE, self.root, 0, LEGACY_TREE.max_value))
        else:
            out.append(TreePass(FLAT_TREE, self.root, 0, MAX_ID))
        if include_scoped:
            out.append(TreePass(SCOPED_TREE, self.scoped_root, SCOPED_TREE.min_value, SCOPED_TREE.max_value))
        return out


def _relative(path: str, base: str) -> str | None:
    prefix = base.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


# ---------------------------------------------------------------- listing


@dataclass(slots=True)
class LedgerBatch:
    """The ledgers of one leaf directory, ascending. `skipped` are child names that are not ledgers."""

    directory: str
    ledger_ids: list[LedgerId]
    skipped: list[str] = field(default_factory=list)


ChildrenFn = Callable[[str], Awaitable[Sequence[str] | None]]  # None: the znode does not exist (race)


async def walk_ledgers(
    paths: LedgerPaths,
    children: ChildrenFn,
    start: LedgerId | None = None,
    end: LedgerId | None = None,
    include_scoped: bool = True,
    on_skip: Callable[[str, str], None] | None = None,
) -> AsyncIterator[LedgerBatch]:
    """Yield ledgers in ascending id order, one leaf directory per batch, restricted to [start, end).

    Directories whose id range misses [start, end) are never listed, so a scan can resume from a cursor
    (the last id seen + 1) cheaply. Names that are not strictly ledger-shaped are skipped and reported
    through `on_skip(parent, name)`; a directory that vanished mid-walk counts as empty.
    """
    lo = _value(start) if start is not None else 0
    hi = _value(end) - 1 if end is not None else SCOPED_TREE.max_value
    for p in paths.passes(include_scoped):
        plo, phi = max(lo, p.lo), min(hi, p.hi)
        if plo > phi:
            continue
        async for batch in _walk_tree(p, children, plo, phi, on_skip):
            yield batch


async def _walk_tree(
    p: TreePass, children: ChildrenFn, lo: int, hi: int, on_skip: Callable[[str, str], None] | None
) -> AsyncIterator[LedgerBatch]:
    tree = p.tree
    leaf_depth = len(tree.widths) - 1
    async for directory, prefix, matched, skipped in _walk_digit_tree(p, children, lo, hi, leaf_depth, on_skip):
        values = []
        for _, digits in matched:
            value = int(prefix + digits)
            if lo <= value <= hi and value <= tree.max_value:
                values.append(value)
            elif not (p.lo <= value <= p.hi) and on_skip:
                on_skip(directory, f"{prefix + digits} (misplaced for this layout)")
        values.sort()  # as ints, the order of their ids (`_value` keeps it), compared at C speed
        ids = [_from_value(v) for v in values] if tree is SCOPED_TREE else [LedgerId(0, v) for v in values]
        if ids:
            yield LedgerBatch(directory, ids, skipped)


Listed = tuple[str, str, list[tuple[str, str]], list[str]]  # directory, its digits, (name, digits) matched, skipped


async def _walk_digit_tree(
    p: TreePass,
    children: ChildrenFn,
    lo: int,
    hi: int,
    last_depth: int,
    on_skip: Callable[[str, str], None] | None = None,
) -> AsyncIterator[Listed]:
    """The one walk of a ledger digit tree: list the directories of `p` from its base down to `last_depth`,
    depth-first, children in numeric order, never descending into a directory whose id range misses
    [lo, hi]; yield each directory listed at `last_depth` with its accumulated digits, the names there
    that fit the level (with their digits) and the others. Names that do not fit a level are reported
    through `on_skip(parent, name)`, except at the base (other BookKeeper znodes live there); a directory
    that vanished mid-walk (or is empty) yields nothing."""
    tree = p.tree
    regexes = [tree.level_regex(d) for d in range(last_depth + 1)]
    # Only the names of the directories on the current path are held in memory (at most 10 000 per
    # level).
    stack: list[tuple[str, str, int]] = [(p.base, "", 0)]
    while stack:
        directory, prefix, depth = stack.pop()
        names = await children(directory)
        if not names:
            continue
        regex = regexes[depth]
        matched: list[tuple[str, str]] = []
        skipped: list[str] = []
        for name in names:
            m = regex.fullmatch(name)
            if m:
                matched.append((name, m.group(1)))
            elif depth > 0 or tree is FLAT_TREE:
                # At the root, non-matching names are other BookKeeper znodes: skip them silently.
                skipped.append(name)
        if skipped and on_skip and not (tree is FLAT_TREE and depth == 0):
            for name in skipped:
                on_skip(directory, name)
        if depth == last_depth:
            yield directory, prefix, matched, skipped
            continue
        subdirs = []
        for name, digits in matched:
            rlo, rhi = tree.prefix_range(prefix + digits)
            if rhi >= lo and rlo <= hi:
                subdirs.append((int(digits), name, prefix + digits))
        # Push in descending order so that the smallest is popped first.
        subdirs.sort(reverse=True)
        for _, name, digits in subdirs:
            stack.append((join(directory, name), digits, depth + 1))


# ---------------------------------------------------------------- under-replication markers

# Used with fullmatch(); ASCII digits only, at most as many as a Java long has.
MARKER_LEAF = re.compile(r"urL([0-9]{1,19})")
SCOPED_MARKER_LEAF = re.compile(r"urL([0-9]{1,19})_([0-9]{1,19})")
_HEX4 = re.compile(r"[0-9a-f]{4}")


def _hex_levels(n: int) -> list[str]:
    return [f"{(n >> s) & 0xFFFF:04x}" for s in (48, 32, 16, 0)]


class MarkerPaths:
    """Java's under-replication marker scheme (spec §5.1) and our scoped extension (§2.4)."""

    def __init__(self, ledgers_root: str) -> None:
        self.base = join(ledgers_root, "underreplication")
        self.ledgers = join(self.base, "ledgers")
        self.scoped_ledgers = join(self.base, "scopedledgers")
        self.locks = join(self.base, "locks")
        self.scoped_locks = join(self.base, "scopedlocks")
        self.layout = join(self.base, "LAYOUT")
        self.disable = join(self.base, "disable")
        self.lost_bookie_recovery_delay = join(self.base, "lostBookieRecoveryDelay")
        self.check_all_ledgers_ctime = join(self.base, "checkallledgersctime")
        self.placement_policy_check_ctime = join(self.base, "placementpolicycheckctime")
        self.replicas_check_ctime = join(self.base, "replicascheckctime")
        self.auditor_election = join(self.base, "auditorelection")

    @staticmethod
    def leaf_name(ledger_id: LedgerId) -> str:
        if ledger_id.scope == 0:
            return f"urL{ledger_id.ledger:010d}"
        return f"urL{ledger_id.scope}_{ledger_id.ledger:010d}"

    def marker(self, ledger_id: LedgerId | int) -> str:
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        if lid.scope == 0:
            return join(self.ledgers, *_hex_levels(lid.ledger), self.leaf_name(lid))
        return join(self.scoped_ledgers, *_hex_levels(lid.scope), *_hex_levels(lid.ledger), self.leaf_name(lid))

    def lock(self, ledger_id: LedgerId | int) -> str:
        lid = ledger_id if isinstance(ledger_id, LedgerId) else LedgerId(0, ledger_id)
        return join(self.scoped_locks if lid.scope else self.locks, self.leaf_name(lid))

    def parse_marker(self, path: str) -> LedgerId | None:
        """The ledger a marker path names, if (and only if) it is exactly where `marker()` puts it."""
        for base, levels, regex in ((self.ledgers, 4, MARKER_LEAF), (self.scoped_ledgers, 8, SCOPED_MARKER_LEAF)):
            rel = _relative(path, base)
            if rel is None:
                continue
            parts = rel.split("/")
            m = regex.fullmatch(parts[-1])
            if len(parts) != levels + 1 or not m or not all(_HEX4.fullmatch(x) for x in parts[:-1]):
                return None
            try:
                lid = LedgerId(0, int(m.group(1))) if levels == 4 else LedgerId(int(m.group(1)), int(m.group(2)))
            except ValueError:
                return None
            return lid if self.marker(lid) == path else None
        return None


# ---------------------------------------------------------------- leaf directories (partition planning)


@dataclass(frozen=True, slots=True)
class LeafDirectory:
    """A directory whose children are ledger znodes, with the ids (inclusive) it can hold.

    `children` is filled in by an adapter that asks for it (ZooKeeper: the znode's numChildren, which
    may include a stray non-ledger name); None when not asked.
    """

    path: str
    first: LedgerId
    last: LedgerId
    children: int | None = None


def _id_at_or_after(value: int) -> LedgerId:
    scope, ledger = divmod(value, _TEN19)
    return LedgerId(scope + 1, 0) if ledger > MAX_ID else LedgerId(scope, ledger)


def _id_at_or_before(value: int) -> LedgerId:
    scope, ledger = divmod(value, _TEN19)
    return LedgerId(scope, min(ledger, MAX_ID))


async def walk_leaf_directories(
    paths: LedgerPaths, children: ChildrenFn, include_scoped: bool = True
) -> AsyncIterator[LeafDirectory]:
    """Yield every leaf directory in ascending id order WITHOUT listing any leaf directory.

    Only the directories above the leaves are listed (hierarchical: the root and its 2-digit children;
    long: four levels), so planning a sweep of N ledgers costs about N / 10 000 listings. The flat
    layout has a single leaf directory, the root. The ranges of two directories never overlap.
    """
    for p in paths.passes(include_scoped):
        tree = p.tree
        hi = min(p.hi, tree.max_value)
        leaf_depth = len(tree.widths) - 1
        if leaf_depth == 0:
            # Flat: the root is the one leaf directory (listing it would list every ledger).
            yield LeafDirectory(p.base, _id_at_or_after(p.lo), _id_at_or_before(hi))
            continue
        # Strays among the directories are not ours to plan: skipped silently (no on_skip).
        async for directory, prefix, matched, _ in _walk_digit_tree(p, children, p.lo, hi, leaf_depth - 1):
            subdirs = []
            for name, digits in matched:
                lo, top = tree.prefix_range(prefix + digits)
                lo, top = max(lo, p.lo), min(top, hi)
                if lo <= top:
                    subdirs.append((lo, top, name))
            subdirs.sort()
            for lo, top, name in subdirs:
                first, last = _id_at_or_after(lo), _id_at_or_before(top)
                if first <= last:
                    yield LeafDirectory(join(directory, name), first, last)
