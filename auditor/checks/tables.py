"""Human output in one shape: rich tables (and lines). On a terminal, as wide as the terminal (long cells
wrap); into a pipe, a file or a CI log, never wrapped: each row is one line, so grepping a ledger id
finds its bookie and entries (a fixed width wrapped rows once the identifiers alone filled it)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import IO, Any

PIPE_WIDTH = 1000  # columns off a terminal: wider than any row we print


def console(out: IO[str] | None = None) -> Any:
    from rich.console import Console

    stream = out if out is not None else sys.stdout
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return Console(file=stream)
    return Console(file=stream, width=PIPE_WIDTH)


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    title: str | None = None,
    out: IO[str] | None = None,
) -> None:
    from rich.table import Table

    table = Table(title=title)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console(out).print(table)
