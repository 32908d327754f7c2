"""Hypothesis profiles: `full` (the default: every property test runs the example count it
names) and `fast` (HYPOTHESIS_PROFILE=fast, set by `make test-fast`: a tenth of it, at
least FAST_MINIMUM). Property tests name their count through `examples(n)`.

Neither profile has a per-example deadline or the too-slow health check: both measure wall
time, and on a busy 2-core machine they fail tests for timing, not for a bug."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

FAST_MINIMUM = 20
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "full")
if PROFILE not in ("fast", "full"):
    raise RuntimeError(f"HYPOTHESIS_PROFILE={PROFILE!r}: expected 'fast' or 'full'")


def examples(full: int) -> int:
    """The example count for a property test that runs `full` examples in the full tier."""
    return full if PROFILE == "full" else min(full, max(FAST_MINIMUM, full // 10))


def load() -> None:
    untimed = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
    settings.register_profile("full", **untimed)  # type: ignore[arg-type]
    settings.register_profile("fast", max_examples=examples(settings.default.max_examples),
                              **untimed)  # type: ignore[arg-type]
    settings.load_profile(PROFILE)
