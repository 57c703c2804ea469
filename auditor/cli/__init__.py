"""The `bk-auditor` command line: `app`, the console entry point, with every command registered here, in
the order `--help` lists them.

* `run`      - the daemon (auditor.daemon.service.serve)
* `check`    - one-shot checks (auditor.checks.oneshot.main); exit 0 clean, 1 findings, 2 errors
* `sweep`    - the same checks over the whole cluster as a Spark job (auditor.spark.sweep); same exit codes
* `scrub`    - one digest scrub pass (auditor.checks.scrub_oneshot.main): exit 0 clean, 1 damage found, 2 errors
* `repair`   - the repair worker (auditor.repair.run): until interrupted, or `--once`; exit 0 all repaired,
  1 some ledger blocked or not taken, 2 errors
* `underreplicated`, `can-decommission` - questions about the cluster, answered here or with --admin by a daemon
* `whoisauditor`, `recovery-delay`, `replication` - the operator's switches, on ZooKeeper or through a daemon
* `agent`    - the bookie-side index agent (auditor.agent.main), beside one DbLedgerStorage bookie
* `status`, `findings`, `explain`, `trigger`, `pause`, `repair-limits`, `resume`, `health` - clients of a
  running daemon's admin API (`--admin host:port`, else $BKAUDIT_ADMIN_ADDRESS, else the default
  admin.bind, 127.0.0.1:7979); `explain` also answers here without a daemon.
* Java's shell names, hidden from the command list and named in its epilog: `listunderreplicated`
  (underreplicated), `lostbookierecoverydelay` (recovery-delay), `autorecovery` (replication),
  `triggeraudit` (trigger bookies).

Every error (bad config, daemon unreachable, bad ledger id) is one line on stderr and exit code 2: the
one table `auditor.cli.common.EXIT_CODES` turns an error class into its exit code (3: a standby refused a
leader-only call). docs/admin-api.md, "Exit codes", has every command's.

The modules: `common` (exit codes, settings loading, shared options), `admin_client` (reaching a daemon's
admin API, its TLS material), `daemons` (run, repair), `checks` (check, sweep), `questions`, `switches`,
`admin_commands` (the admin API's clients), `render` (tables and text of what the commands show).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
import typer.core

from auditor import __version__
from auditor.cli.admin_commands import (
    explain,
    findings,
    health,
    pause,
    repair_limits,
    resume,
    status,
    trigger,
    triggeraudit,
)
from auditor.cli.agent import agent
from auditor.cli.checks import check, scrub, sweep
from auditor.cli.daemons import repair, run
from auditor.cli.questions import can_decommission, underreplicated
from auditor.cli.switches import recovery_delay, replication, whoisauditor

if TYPE_CHECKING:  # typer's own (vendored) click, whose Context its options are rendered with
    from typer import _click

# Java's shell names for our commands (hidden from the list; the epilog names them).
JAVA_ALIASES: dict[str, str] = {
    "listunderreplicated": "underreplicated",
    "lostbookierecoverydelay": "recovery-delay",
    "autorecovery": "replication",
    "triggeraudit": "trigger bookies",
}

app = typer.Typer(
    name="bk-auditor",
    help="Durability auditor for Apache BookKeeper clusters.",
    epilog="Java shell names: " + ", ".join(f"{a} = {c}" for a, c in JAVA_ALIASES.items()) + ".",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _flags_take_no_value() -> None:
    """Typer's rich help shows every flag (--yes, --help) as taking `<bool>`: a flag takes no value, so its
    type column is left empty, as click's plain help does."""
    shown = typer.core.TyperOption.display_type_rich
    if getattr(shown, "_flags_take_no_value", False):
        return

    def display_type_rich(self: typer.core.TyperOption, ctx: _click.Context) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    display_type_rich._flags_take_no_value = True  # type: ignore[attr-defined]
    typer.core.TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_take_no_value()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"bk-auditor {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Durability auditor for Apache BookKeeper clusters."""


app.command()(run)
app.command()(check)
app.command()(repair)
app.command()(sweep)
app.command()(scrub)
app.command()(underreplicated)
app.command("listunderreplicated", hidden=True)(underreplicated)
app.command("can-decommission")(can_decommission)
app.command()(whoisauditor)
app.command("recovery-delay")(recovery_delay)
app.command("lostbookierecoverydelay", hidden=True)(recovery_delay)
app.command()(replication)
app.command("autorecovery", hidden=True)(replication)
app.command()(status)
app.command()(findings)
app.command()(explain)
app.command()(trigger)
app.command(hidden=True)(triggeraudit)
app.command()(pause)
app.command("repair-limits")(repair_limits)
app.command()(resume)
app.command()(health)
app.command()(agent)
