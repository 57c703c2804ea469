"""The one error the test cluster raises."""

from __future__ import annotations


class HarnessError(RuntimeError):
    """The real cluster could not be set up or did not behave; the message says which process and log."""
