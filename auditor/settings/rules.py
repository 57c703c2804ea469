"""Rules that involve more than one setting, or the outside world (files that must exist, ZooKeeper
paths, the metadata location)."""

from __future__ import annotations

from .model import Settings
from .origins import Origin, origin_for
from .values import parse_bind


def cross_checks(s: Settings, stacks: list[dict[str, Origin]]) -> list[str]:
    """Rules that involve more than one setting or the outside world."""
    problems: list[str] = []

    def say(dotted: str, msg: str) -> None:
        origin = origin_for(tuple(dotted.split(".")), stacks)
        problems.append(f"{origin.label() if origin else dotted}: {msg}")

    if s.has_metadata:
        try:
            s.metadata_location()
        except Exception as exc:  # MetadataConfigError / UnsupportedLayoutError from the adapters
            say("metadata_service_uri" if s.metadata_service_uri else "zookeeper.servers", str(exc))
    from auditor.metadata.bookkeeper.election import election_base
    from auditor.metadata.errors import MetadataConfigError
    from auditor.metadata.location import zk_path_problem

    root = s.zookeeper.ledgers_root
    if zk_path_problem(root.rstrip("/") or "/"):
        say(
            "zookeeper.ledgers_root",
            f"must be a valid absolute ZooKeeper path: {root!r} {zk_path_problem(root.rstrip('/') or '/')}",
        )
    path = s.election.path
    if path is not None and (path.rstrip("/") == "" or zk_path_problem(path.rstrip("/"))):
        say("election.path", f"must be a valid absolute ZooKeeper path, got {path!r}")
    else:
        try:
            election_base(s.election_path, s.ledgers_root, s.election.join_java_election)
        except MetadataConfigError as exc:
            say("election.path", str(exc))
    if s.election.join_java_election:
        from auditor.metadata.codecs.formats import is_valid_bookie_id

        if not is_valid_bookie_id(s.election.identity):
            say(
                "election.identity",
                f"{s.election.identity!r} is not a valid BookKeeper bookie id, which the "
                "Java election needs (letters, digits, ':', '.', '-')",
            )
    if not s.election.identity.strip():
        say("election.identity", "must not be empty")
    p = s.placement
    if p.desired_zones_per_write_quorum < p.min_zones_per_write_quorum:
        say(
            "placement.desired_zones_per_write_quorum",
            f"must be >= min_zones_per_write_quorum ({p.min_zones_per_write_quorum}), "
            f"got {p.desired_zones_per_write_quorum}",
        )
    r = s.racks
    if r.source == "file":
        if r.file is None:
            say("racks.source", "is 'file' but racks.file is not set")
        elif not r.file.is_file():
            say("racks.file", f"{r.file}: no such file")
    if r.source == "script":
        if r.script is None:
            say("racks.source", "is 'script' but racks.script is not set")
        elif not r.script.is_file():
            say("racks.script", f"{r.script}: no such file")
    t = s.bookie_client.tls
    if t.enabled:
        from auditor.files.tls import TlsFileError, client_context

        try:
            client_context(t.files())  # every file read and checked now: a bad one is exit 2 at start
        except TlsFileError as exc:
            say(f"bookie_client.tls.{exc.setting}", exc.message)
    else:
        for name in t.material_given():
            say(
                f"bookie_client.tls.{name}",
                "is set but TLS to bookies is off (bookie_client.tls.enabled, Java's tlsProviderFactoryClass): "
                "enable it or remove the setting",
            )
    from .zksecurity import security_problems

    security_problems(s, say)
    a = s.admin
    if (a.tls_cert is None) != (a.tls_key is None):
        say("admin.tls_cert" if a.tls_cert else "admin.tls_key", "admin TLS needs both tls_cert and tls_key")
    for name in ("tls_cert", "tls_key", "tls_client_ca"):
        f = getattr(a, name)
        if f is not None and not f.is_file():
            say(f"admin.{name}", f"{f}: no such file")
    if a.tls_client_ca is not None and a.tls_cert is None:
        say("admin.tls_client_ca", "client certificates need admin TLS: set admin.tls_cert and admin.tls_key too")
    if a.authorized_clients and a.tls_client_ca is None:
        say(
            "admin.authorized_clients",
            "names client certificates, but admin.tls_client_ca is not set, so no client presents one",
        )
    if a.probe_bind is not None and parse_bind(a.probe_bind) == parse_bind(a.bind) and parse_bind(a.bind)[1] != 0:
        say("admin.probe_bind", f"must differ from admin.bind ({a.bind})")
    return problems
