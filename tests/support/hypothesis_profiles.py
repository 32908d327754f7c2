"""Hypothesis profiles: `full` (the default: every property test runs the example count it
names) and `fast` (HYPOTHESIS_PROFILE=fast, set by `make test-fast`: a tenth of it, at
least FAST_MINIMUM). Property tests name their count through `examples(n)`."""

from __future__ import annotations

import os

from hypothesis import settings

FAST_MINIMUM = 20
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "full")
if PROFILE not in ("fast", "full"):
    raise RuntimeError(f"HYPOTHESIS_PROFILE={PROFILE!r}: expected 'fast' or 'full'")


def examples(full: int) -> int:
    """The example count for a property test that runs `full` examples in the full tier."""
    return full if PROFILE == "full" else min(full, max(FAST_MINIMUM, full // 10))


def load() -> None:
    settings.register_profile("full", settings())
    settings.register_profile("fast", max_examples=examples(settings.default.max_examples))
    settings.load_profile(PROFILE)
