"""YAML from outside (config files, rack files) with bounded nesting.

PyYAML's safe loader recurses per nesting level (RecursionError past a few hundred) and its scanner does
work per open collection on every token, so a few kilobytes of `[[[[...` cost seconds; its C loader
crashes the process (segmentation fault) on 100,000 levels. No configuration nests more than a handful
of levels: deeper than MAX_DEPTH is a YAMLError, raised as soon as the parser gets there.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

MAX_DEPTH = 64
# Quoted scalars and comments, whose brackets do not nest anything.
_NOT_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\']|\'\')*\'|(?:^|(?<=\s))#[^\n]*', re.MULTILINE)
_BRACKETS = re.compile(r"[\[\]{}]")


class _BoundedSafeLoader(yaml.SafeLoader):
    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                # peek_event is unannotated in types-PyYAML (yaml/parser.pyi).
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _flow_depth_exceeded(text: str) -> bool:
    """A cheap look at `[`/`{` nesting before the scanner, which spends a second on 1,000 open brackets.
    It may over-count (a bracket inside a plain scalar), so it errs only towards refusing absurd input."""
    depth = 0
    for bracket in _BRACKETS.findall(_NOT_STRUCTURE.sub("", text)):
        depth = depth + 1 if bracket in "[{" else max(depth - 1, 0)
        if depth > MAX_DEPTH:
            return True
    return False


def load(text: str) -> Any:
    """Like yaml.safe_load, with nesting bounded (yaml.YAMLError beyond MAX_DEPTH levels)."""
    if _flow_depth_exceeded(text):
        raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels")
    return yaml.load(text, Loader=_BoundedSafeLoader)
