"""The full-cluster sweep as a PySpark job (docs/spark.md).

Names are imported on first use, so that importing the package imports neither pyspark nor the
checks, and `python -m auditor.spark.sweep` does not find its module already imported.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "get_session": "session",
    "PartitionReport": "sweep",
    "SweepOptions": "sweep",
    "SweepResult": "sweep",
    "main": "sweep",
    "run_sweep": "sweep",
    "sweep_main": "sweep",
    "write_outputs": "sweep",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
