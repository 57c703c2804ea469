"""The deletion-discipline verdicts: missing (listed, gone) and orphan (tagged, unlisted) ledgers."""

from __future__ import annotations

from types import MappingProxyType

from auditor.durability.findings import Category, Severity
from auditor.durability.ids import LedgerId
from auditor.durability.model import LedgerMetadata, LedgerState, Segment
from auditor.durability.references import (
    CursorListing,
    ListedLedger,
    ManagedLedgerListing,
    References,
    SchemaListing,
    missing_finding,
    orphan_candidate,
    orphan_finding,
)

ML = "public/default/persistent/orders"
NOW = 10_000_000_000
HOUR = 3600


def md(lid: int, tags: dict[str, str], closed: bool = True) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=LedgerId(0, lid),
        ensemble_size=2,
        write_quorum=2,
        ack_quorum=2,
        state=LedgerState.CLOSED if closed else LedgerState.OPEN,
        last_entry_id=9 if closed else -1,
        length=1000 if closed else 0,
        segments=(Segment(0, ("b1:3181", "b2:3181")),),
        custom_metadata=MappingProxyType({k: v.encode() for k, v in tags.items()}),
    )


def data_tags(ml: str = ML) -> dict[str, str]:
    return {"application": "pulsar", "component": "managed-ledger", "pulsar/managed-ledger": ml}


def refs(*ledgers: ListedLedger, cursors: dict[str, int | None] | None = None, shadow: str | None = None) -> References:
    r = References("/", found=True)
    r.managed_ledgers[ML] = ManagedLedgerListing(ML, f"/managed-ledgers/{ML}", tuple(ledgers), shadow)
    for name, lid in (cursors or {}).items():
        r.cursors[(ML, name)] = CursorListing(ML, name, f"/managed-ledgers/{ML}/{name}", lid)
    return r


def verdict(m: LedgerMetadata, r: References, age_s: float = 2 * HOUR):
    c = orphan_candidate(m, int(NOW - age_s * 1000))
    assert c is not None
    return orphan_finding(c, r, now_ms=NOW, grace_seconds=HOUR, referenced=r.by_ledger())


def test_a_listed_ledger_that_is_gone_is_critical_and_names_its_topic() -> None:
    r = refs(ListedLedger(5, 10, 1000, 123), ListedLedger(7))
    f = missing_finding(5, r.by_ledger()[5], last_seen_ms=42)
    assert f is not None and f.category is Category.LEDGER_MISSING and f.severity is Severity.CRITICAL
    assert f.pulsar is not None and f.pulsar["topic"] == "persistent://public/default/orders"
    assert "persistent://public/default/orders still lists it" in f.message
    assert f.detail["lastSeenMs"] == 42 and f.detail["listedBy"][0]["entries"] == 10


def test_an_offloaded_ledger_whose_bookkeeper_copy_was_deleted_is_not_missing() -> None:
    r = refs(ListedLedger(5, offloaded=True, bookkeeper_deleted=True))
    assert missing_finding(5, r.by_ledger()[5]) is None
    # offloaded but the BookKeeper copy must still exist: its absence is loss
    r = refs(ListedLedger(5, offloaded=True, bookkeeper_deleted=False))
    assert missing_finding(5, r.by_ledger()[5]) is not None


def test_a_ledger_listed_only_by_a_shadow_topic_is_informational() -> None:
    r = refs(ListedLedger(5), shadow="persistent://public/default/source")
    f = missing_finding(5, r.by_ledger()[5])
    assert f is not None and f.severity is Severity.INFO and f.detail["staleShadowListing"] is True


def test_a_missing_cursor_ledger_names_the_cursor() -> None:
    r = refs(ListedLedger(7), cursors={"sub%2Fa": 9})
    f = missing_finding(9, r.by_ledger()[9])
    assert f is not None and f.pulsar is not None and f.pulsar["cursor"] == "sub%2Fa" and f.pulsar["kind"] == "cursor"


def test_an_unlisted_data_ledger_past_the_grace_is_an_orphan_with_its_size() -> None:
    f = verdict(md(3, data_tags()), refs(ListedLedger(5), ListedLedger(7)))
    assert f is not None and f.category is Category.ORPHAN_LEDGER and f.severity is Severity.INFO
    assert f.detail["entries"] == 10 and f.detail["bytes"] == 1000
    assert "trimmed but not deleted" in f.detail["reason"]
    assert f.detail["cleanup"] == "bin/bookkeeper shell deleteledger -ledgerid 3 -force"
    f = verdict(md(6, data_tags()), refs(ListedLedger(5), ListedLedger(7)))
    assert f is not None and "does not list it" in f.detail["reason"] and "trimmed" not in f.detail["reason"]


def test_a_young_or_listed_ledger_is_not_an_orphan() -> None:
    r = refs(ListedLedger(5))
    assert verdict(md(6, data_tags()), r, age_s=HOUR - 1) is None
    assert verdict(md(5, data_tags()), r) is None


def test_a_ledger_of_a_deleted_topic_is_an_orphan() -> None:
    f = verdict(md(6, data_tags("public/default/persistent/gone")), refs(ListedLedger(5)))
    assert f is not None and "no longer exists" in f.detail["reason"]


def test_cursor_ledgers_are_judged_against_their_cursor() -> None:
    tags = {**data_tags(), "pulsar/cursor": "sub"}
    assert verdict(md(9, tags), refs(ListedLedger(5), cursors={"sub": 9})) is None
    f = verdict(md(8, tags), refs(ListedLedger(5), cursors={"sub": 9}))
    assert f is not None and "now uses ledger 9" in f.detail["reason"]
    f = verdict(md(8, tags), refs(ListedLedger(5), cursors={}))
    assert f is not None and "cursor sub" in f.detail["reason"]


def test_a_ledger_referenced_elsewhere_is_never_an_orphan() -> None:
    # tagged with one topic, but listed by another managed ledger (e.g. a shadow topic's copy)
    r = refs(ListedLedger(5))
    r.managed_ledgers["t/n/persistent/other"] = ManagedLedgerListing("t/n/persistent/other", "/x", (ListedLedger(6),))
    assert verdict(md(6, data_tags()), r) is None


def test_no_orphan_verdict_when_the_owner_could_not_be_read() -> None:
    r = refs(ListedLedger(5))
    r.unreadable[f"/managed-ledgers/{ML}/sub"] = "not a Pulsar cursor info"
    assert verdict(md(6, data_tags()), r) is None


def test_schema_ledgers_are_judged_against_their_locator() -> None:
    tags = {"application": "pulsar", "component": "schema", "pulsar/schemaId": "public/default/orders"}
    r = refs()
    r.schemas["public/default/orders"] = SchemaListing("public/default/orders", "/schemas/public/default/orders", (4,))
    assert verdict(md(4, tags), r) is None
    f = verdict(md(3, tags), r)
    assert f is not None and "schema public/default/orders does not list it" == f.detail["reason"]


def test_ledgers_that_are_not_judged() -> None:
    assert orphan_candidate(md(1, {}), 0) is None  # no tags: not Pulsar's (or Pulsar 2.4)
    compacted = {
        "application": "pulsar",
        "component": "compacted-ledger",
        "pulsar/compactedTopic": "persistent://a/b/c",
    }
    assert orphan_candidate(md(1, compacted), 0) is None  # its owner is recorded in a cursor ledger
    assert orphan_candidate(md(1, {"application": "other", "pulsar/managed-ledger": ML}), 0) is None
