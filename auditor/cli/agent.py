"""`bk-auditor agent`: the bookie-side index agent (auditor/agent/, docs/agent.md), run beside one
DbLedgerStorage bookie with its directories mounted read-only. Bad options are one line and exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from auditor.cli.common import exit_on_error, run_with_loop
from auditor.errors import ConfigError


def _paths(text: str | None) -> tuple[Path, ...]:
    return tuple(Path(p.strip()) for p in (text or "").split(",") if p.strip())


def agent(
    ledger_dirs: Annotated[
        str | None, typer.Option("--ledger-dirs", help="The bookie's ledgerDirectories, comma-separated.")
    ] = None,
    index_dirs: Annotated[
        str | None, typer.Option("--index-dirs", help="Its indexDirectories (default: the ledger directories).")
    ] = None,
    bookie_conf: Annotated[
        Path | None, typer.Option("--bookie-conf", help="Read the directories from the bookie's bk_server.conf.")
    ] = None,
    bookie_id: Annotated[str | None, typer.Option("--bookie-id", help="Default: from the bookie's cookie.")] = None,
    listen: Annotated[str, typer.Option("--listen", help="host:port of the gRPC service.")] = "127.0.0.1:7980",
    token_file: Annotated[
        Path | None, typer.Option("--token-file", help="The bearer token every call must carry (required).")
    ] = None,
    tls_cert: Annotated[Path | None, typer.Option("--tls-cert", help="Server certificate (PEM).")] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="Its private key (PEM).")] = None,
    tls_client_ca: Annotated[
        Path | None, typer.Option("--tls-client-ca", help="CA of client certificates: mutual TLS.")
    ] = None,
    insecure: Annotated[
        bool, typer.Option("--insecure", help="Serve without a token (loopback --listen only).")
    ] = False,
    metrics_listen: Annotated[str | None, typer.Option("--metrics-listen", help="host:port for /metrics.")] = None,
    scratch_dir: Annotated[
        Path | None, typer.Option("--scratch-dir", help="Where the agent's own files go (default: a temp dir).")
    ] = None,
    max_index_age: Annotated[
        float, typer.Option("--max-index-age", help="Seconds: an older view of the index is refreshed first.")
    ] = 1.0,
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
    log_format: Annotated[str, typer.Option("--log-format", help="json|console")] = "json",
) -> None:
    """Serve which entries this DbLedgerStorage bookie's index holds, and verify stored digests (read-only)."""
    from auditor.agent.bookieconf import from_bookie_conf, layout
    from auditor.agent.main import AgentOptions, run
    from auditor.logging import configure_logging

    configure_logging(log_level, log_format)
    with exit_on_error():
        if bookie_conf is not None:
            if ledger_dirs or index_dirs:
                raise ConfigError("agent: --bookie-conf names the directories: not with --ledger-dirs/--index-dirs")
            found = from_bookie_conf(bookie_conf)
            found = layout(found.ledger_dirs, found.index_dirs, bookie_id or found.bookie_id)
        else:
            found = layout(_paths(ledger_dirs), _paths(index_dirs), bookie_id or "")
        if max_index_age < 0:
            raise ConfigError(f"agent: --max-index-age must be >= 0, got {max_index_age}")
        options = AgentOptions(
            layout=found,
            listen=listen,
            token_file=token_file,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_client_ca=tls_client_ca,
            insecure=insecure,
            metrics_listen=metrics_listen,
            scratch_dir=scratch_dir,
            max_index_age=max_index_age,
        )
        options.check()
        code = run_with_loop(run, options)
    raise typer.Exit(int(code or 0))
