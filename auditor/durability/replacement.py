"""Which bookie replaces ensemble index i of one segment, by the ledger's placement policy. Pure.

Java's `replaceBookie` is best effort: it prefers the replaced bookie's rack and only logs a FAIL adherence
at debug level, which is how a DR test ended with all copies on one rack (java-auditor.md §8, item 14).
Here the policy is the one the scrutiny judges (`placement.check_ensemble`), and a candidate is judged by
the write quorums that contain index i in the new ensemble (the others do not change with the choice):

* candidates are registered writable bookies (read-only ones refuse adds) outside the segment's ensemble
  and outside `exclude` (e.g. targets already chosen for other indexes of the same segment);
* the best adherence wins (MEETS_STRICT over MEETS_SOFT); among equals, the replaced bookie's rack
  (keeps the failure domains the writer chose), then the caller's order (e.g. most free space first);
* if the best is FAIL, there is no choice (`Refusal`) unless `best_effort` is set, which then picks the
  least bad and says so. A policy that fails for every choice (e.g. zone-aware E not a multiple of WQ)
  is refused too, with the policy's reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .placement import Adherence, PlacementPolicy, check_ensemble, normalize_location

__all__ = ["Choice", "Refusal", "choose_replacement", "touching_quorums"]


@dataclass(frozen=True, slots=True)
class Choice:
    bookie: str
    adherence: Adherence
    reasons: tuple[str, ...]  # why not MEETS_STRICT (empty when it is)
    best_effort: bool = False  # chosen although the policy is not met (the operator allowed it)


@dataclass(frozen=True, slots=True)
class Refusal:
    """No bookie satisfies the policy: the caller reports `repair_blocked` (no_eligible_bookie)."""

    reason: str


def touching_quorums(index: int, ensemble_size: int, write_quorum: int) -> frozenset[int]:
    """Start indexes of the write quorums that contain `index`."""
    return frozenset((index - j) % ensemble_size for j in range(write_quorum))


def _judge(
    ensemble: Sequence[str],
    index: int,
    candidate: str,
    write_quorum: int,
    ack_quorum: int,
    policy: PlacementPolicy,
    locations: Mapping[str, str | None],
) -> tuple[Adherence, tuple[str, ...]]:
    trial = list(ensemble)
    trial[index] = candidate
    verdict = check_ensemble(trial, write_quorum, ack_quorum, policy, locations)
    starts = touching_quorums(index, len(trial), write_quorum)
    adherence = Adherence.MEETS_STRICT
    reasons = list(verdict.reasons)
    if verdict.reasons:  # ensemble-wide: the same for every candidate
        adherence = verdict.adherence
    for q in verdict.quorums:
        if q.start_index in starts:
            adherence = min(adherence, q.adherence)
            reasons.extend(f"write quorum at {q.start_index}: {r}" for r in q.reasons)
    return adherence, tuple(dict.fromkeys(reasons))


def choose_replacement(
    ensemble: Sequence[str],
    index: int,
    write_quorum: int,
    ack_quorum: int,
    policy: PlacementPolicy,
    locations: Mapping[str, str | None],
    writable: Iterable[str],
    *,
    exclude: Iterable[str] = (),
    best_effort: bool = False,
) -> Choice | Refusal:
    """The bookie to put at `ensemble[index]`; `writable` in the caller's order of preference."""
    if not 0 <= index < len(ensemble):
        raise ValueError(f"index {index} is outside an ensemble of {len(ensemble)}")
    banned = set(ensemble) | set(exclude)
    candidates = [b for b in dict.fromkeys(writable) if b not in banned]
    if not candidates:
        return Refusal(f"no writable bookie outside the ensemble {list(ensemble)} to replace {ensemble[index]}")
    old_rack = normalize_location(locations.get(ensemble[index]))
    best: tuple[tuple[int, int, int], Choice] | None = None
    for order, b in enumerate(candidates):
        adherence, reasons = _judge(ensemble, index, b, write_quorum, ack_quorum, policy, locations)
        same_rack = old_rack is not None and normalize_location(locations.get(b)) == old_rack
        key = (-int(adherence), 0 if same_rack else 1, order)
        if best is None or key < best[0]:
            best = (key, Choice(b, adherence, reasons))
    assert best is not None
    choice = best[1]
    if choice.adherence is not Adherence.FAIL:
        return choice
    if best_effort:
        return Choice(choice.bookie, choice.adherence, choice.reasons, best_effort=True)
    why = "; ".join(choice.reasons) or "policy not met"
    return Refusal(
        f"no writable bookie satisfies the {policy.kind.value} placement policy at index {index} "
        f"(replacing {ensemble[index]}; {len(candidates)} candidates; best: {why})"
    )
