"""Whether the verdict could check that the READY models answer requests: a recent synthetic probe.

The verdict reads the sampler's probes (`geadmin.ops.probe`, recorded by `geadmin up` and
`geadmin sampler`) as its evidence that READY models answer. When none of the server's READY
models has a probe recorded, or the newest is older than `stale_after` (three probe intervals,
GEADMIN_PROBE_INTERVAL_S, at least a minute and at most `watch.FRESH_S`, the window in which a
failed probe still counts), nothing checked it: an OK verdict says so in its headline, with how
to turn the probes on. A note, never a reason: it does not change the level.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from geadmin import db, settings
from geadmin.domain import format_duration
from geadmin.errors import ConfigError
from geadmin.telemetry.history import watch

STALE_INTERVALS = 3  # the sampler probes each READY model once an interval: three missed, it stopped
STALE_FLOOR_S = 60.0  # a round of probes of many models can take a few probe timeouts


def stale_after(interval_s: float) -> float:
    """How old the newest probe may be while the sampler still probes (see the module docstring)."""
    return min(watch.FRESH_S, max(STALE_FLOOR_S, STALE_INTERVALS * interval_s))


def setting_interval_s() -> float:
    """GEADMIN_PROBE_INTERVAL_S; the verdict's own freshness window when it is invalid (the
    sampler refuses such a setting and says why)."""
    try:
        return settings.PROBE_INTERVAL_S.get()
    except ConfigError:
        return watch.FRESH_S


@dataclass(frozen=True)
class ProbeCheck:
    """Did a recent probe check that the server's READY models answer requests."""

    server: str
    stale_after_s: float
    latest_at_s: float | None = None  # the newest probe of a READY model, of any age; None: none recorded
    age_s: float | None = None
    unreadable: str = ""  # why the probes could not be read (the workspace database)

    @property
    def checked(self) -> bool:
        return self.age_s is not None and self.age_s <= self.stale_after_s and not self.unreadable

    @property
    def note(self) -> str:
        """One line for the OK headline ("" when checked)."""
        if self.checked:
            return ""
        said = "not checked whether they answer requests: "
        if self.unreadable:
            return said + f"the probes cannot be read ({self.unreadable})"
        if self.latest_at_s is None or self.age_s is None:
            return said + f"no synthetic probe of {self.server} is recorded"
        at = datetime.fromtimestamp(self.latest_at_s, timezone.utc)
        return said + (f"the newest synthetic probe of {self.server} is {format_duration(self.age_s)} old "
                       f"(at {at:%H:%M:%S} UTC; more than {format_duration(self.stale_after_s)}, "
                       f"{STALE_INTERVALS} probe intervals)")

    @property
    def fix(self) -> str:
        """How to turn the probes on ("" when checked)."""
        if self.checked:
            return ""
        return ("run the sampler, which probes every READY model: `geadmin up` runs one for its own Triton "
                "(not with --no-probes or --triton-url); for a Triton started another way, `geadmin sampler "
                f"--url {self.server}` with the same GEADMIN_HOME")

    @property
    def said(self) -> str:
        """The note and its fix, for the OK headline ("" when checked)."""
        return f"{self.note} — to check, {self.fix}" if self.note else ""

    def to_json(self) -> dict[str, object]:
        return {"checked": self.checked, "latest_at": self.latest_at_s, "age_s": self.age_s,
                "stale_after_s": self.stale_after_s, "note": self.note, "fix": self.fix}


def check_probes(server: str, ready: Collection[str], *, now_s: float, interval_s: float,
                 also: Sequence[str] = (), home: Path | None = None) -> ProbeCheck | None:
    """The probe check of `server`'s READY models `ready`; None when none is READY (nothing to
    check). Never raises: an unreadable workspace database is in the check."""
    if not ready:
        return None
    stale = stale_after(interval_s)
    try:
        latest = watch.latest_probes(server, also=also, until_s=now_s + watch.FUTURE_SLACK_S, home=home)
    except db.WorkspaceDatabaseError as exc:
        return ProbeCheck(server, stale, unreadable=str(exc).splitlines()[0])
    newest = max((probe.at_s for name, probe in latest.items() if name in ready), default=None)
    return ProbeCheck(server, stale, newest, None if newest is None else max(0.0, now_s - newest))
