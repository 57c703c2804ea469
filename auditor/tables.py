"""Human output in one shape: rich tables (and lines) on a console as wide as the terminal, and never
narrower than 120 columns (pipes and CI logs would otherwise wrap every row)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import IO, Any


def console(out: IO[str] | None = None) -> Any:
    from rich.console import Console

    stream = out if out is not None else sys.stdout
    return Console(file=stream, width=max(120, Console(file=stream).width))


def print_table(
    columns: Sequence[str], rows: Iterable[Sequence[str]], *, title: str | None = None, out: IO[str] | None = None
) -> None:
    from rich.table import Table

    table = Table(title=title)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console(out).print(table)
