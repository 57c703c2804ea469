"""Target choice: the writable bookie an ensemble index of a ledger moves to, by its placement policy.

The scrutiny's own policy and racks (`auditor.checks.build.Locations`) judge the candidates
(`replacement.choose_replacement`); without a policy to judge (the default one, or no rack data, as the
scrutiny then judges none) every writable bookie meets the default policy. No eligible bookie blocks the
attempt (`no_eligible_bookie`), unless best effort is allowed, which is logged.
"""

from __future__ import annotations

from collections.abc import Iterable

from auditor.checks.context import AuditContext
from auditor.durability.model import LedgerMetadata
from auditor.durability.placement import PlacementPolicy, PolicyKind
from auditor.durability.repairplan import BlockReason
from auditor.durability.replacement import Choice, choose_replacement
from auditor.logging import get_logger

from .attempt import Blocked
from .evidence import BookieStates

log = get_logger("auditor.repair")


class TargetChooser:
    """Chooses replacement bookies with `ctx`'s placement policy, the racks `locations` reads (None:
    placement not judged) and the worker's bookie `states`."""

    def __init__(self, ctx: AuditContext, states: BookieStates, locations: object | None) -> None:
        self._ctx = ctx
        self._states = states  # the worker's, refreshed before each assessment
        self._locations = locations  # auditor.checks.build.Locations (racks), None: placement not judged

    async def choose(
        self, md: LedgerMetadata, segment_index: int, index: int, exclude: Iterable[str], *, best_effort: bool
    ) -> str:
        """The bookie index `index` of segment `segment_index` moves to (not one of `exclude`); `Blocked`
        when none is eligible."""
        segment = md.segments[segment_index]
        policy, racks = await self._placement(md, self._states.writable)
        choice = choose_replacement(
            segment.ensemble,
            index,
            md.write_quorum,
            md.ack_quorum,
            policy,
            racks,
            self._states.writable,
            exclude=exclude,
            best_effort=best_effort,
        )
        if not isinstance(choice, Choice):
            raise Blocked(BlockReason.NO_ELIGIBLE_BOOKIE.value, choice.reason)
        if choice.best_effort:
            log.warning(
                "replacement chosen without meeting the placement policy (best effort allowed)",
                ledgerId=str(md.ledger_id),
                bookieId=choice.bookie,
                reasons=list(choice.reasons),
            )
        return choice.bookie

    async def _placement(
        self, md: LedgerMetadata, candidates: list[str]
    ) -> tuple[PlacementPolicy, dict[str, str | None]]:
        """The scrutiny's policy and racks; no policy to judge (the default one, or no rack data, as the
        scrutiny then judges none) is the default policy, which every candidate meets."""
        policy = self._ctx.options.placement
        where = self._locations
        if policy is None or where is None or not getattr(where, "available", True):
            return PlacementPolicy(kind=PolicyKind.DEFAULT), {}
        racks = dict(await where([*md.bookies, *candidates]))  # type: ignore[operator]
        if not getattr(where, "available", True):
            return PlacementPolicy(kind=PolicyKind.DEFAULT), {}
        return policy, racks
