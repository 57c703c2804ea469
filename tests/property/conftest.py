"""Hypothesis profiles for the parsers of outside data.

`make test` runs the `ci` profile (modest example counts). `make fuzz` selects `fuzz`
(HYPOTHESIS_PROFILE=fuzz): at least 100,000 inputs per target, no deadline, statistics printed.
FUZZ_EXAMPLES overrides the fuzz count (e.g. for a quick rehearsal of the campaign).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "100000")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
