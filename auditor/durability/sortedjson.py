"""`json.dumps(value, sort_keys=True)` with one encoder for every call: the one-line JSON of a finding.

`JSONEncoder.encode` builds a new encoder for every call; a scan prints one line per finding (a million
for a million WQ == AQ ledgers), so the C encoder is built once here and reused (a wire form holds no
cycles, so it is built without the cycle check). Where the C encoder is missing, the pure-Python
`json.JSONEncoder(sort_keys=True)`, the clear path, which gives the same text.
"""

from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

__all__ = ["sorted_json"]


def _not_json(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_C_SORTED_JSON = (
    c_make_encoder(None, _not_json, encode_basestring_ascii, None, ": ", ", ", True, False, True)
    if c_make_encoder is not None
    else None
)
_SORTED_JSON = json.JSONEncoder(sort_keys=True)


def sorted_json(value: Any) -> str:
    """`json.dumps(value, sort_keys=True)` of a value without cycles."""
    if _C_SORTED_JSON is None:
        return _SORTED_JSON.encode(value)
    return "".join(_C_SORTED_JSON(value, 0))
