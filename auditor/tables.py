"""Human output in one shape: rich tables (and lines) on a console as wide as the terminal, and never
narrower than 120 columns (pipes and CI logs would otherwise wrap every row)."""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable, Sequence
from typing import IO, Any


def console(out: IO[str] | None = None) -> Any:
    from rich.console import Console

    stream = out if out is not None else sys.stdout
    return Console(file=stream, width=max(120, Console(file=stream).width))


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    title: str | None = None,
    out: IO[str] | None = None,
    wrap: Collection[str] = (),
) -> None:
    """Columns named in `wrap` (free text) wrap; every other column is an identifier an operator greps
    for on the row that names the ledger, so it stays on one line and the free text takes what is left."""
    from rich.table import Table

    table = Table(title=title)
    for col in columns:
        table.add_column(col, overflow="fold", no_wrap=col not in wrap)
    for row in rows:
        table.add_row(*row)
    console(out).print(table)
