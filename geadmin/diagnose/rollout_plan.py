"""A fleet rollout's plan as its `started` row journals it (reads only): the fleet, the change,
the model, each server with its URL, wave and repository, for an apply the config each
repository held before (a kept revision) and the new one, and for a version rollout the step
after the first (`RetireStep`) or the first step a retire step follows. The rows around it:
`geadmin.diagnose.rollouts`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from geadmin.errors import RolloutJournalError

PREFIX = "fleet "  # the action of every journal row: "fleet " + the change
CHANGES = ("load", "unload", "reload", "apply")


@dataclass(frozen=True)
class PlannedServer:
    name: str
    url: str
    wave: int
    repository: str = ""  # resolved; "" unless the change writes a config
    # The model READY there before the change: what putting it back returns to (None: not read,
    # a plan journaled before geadmin kept it)
    ready: bool | None = None


@dataclass(frozen=True)
class Previous:
    """The config a repository held before an apply: a kept revision (geadmin.repository.revisions).
    A version rollout's first step whose old config would serve the new version's directory (no
    version_policy, `latest`, `all`) keeps that config pinned to the versions that served before
    too (`pinned`: versions, `pinned_sha256`, `pinned_revision`): what its way back writes."""

    repository: str
    sha256: str
    revision: int
    pinned: tuple[int, ...] = ()
    pinned_sha256: str = ""
    pinned_revision: int = 0

    @property
    def back_sha256(self) -> str:
        """The config a put back writes."""
        return self.pinned_sha256 or self.sha256

    @property
    def back_revision(self) -> int:
        return self.pinned_revision or self.revision

    def to_json(self) -> dict[str, Any]:
        kept: dict[str, Any] = {"repository": self.repository, "sha256": self.sha256,
                                "revision": self.revision}
        if self.pinned_revision:
            kept.update(pinned=list(self.pinned), pinned_sha256=self.pinned_sha256,
                        pinned_revision=self.pinned_revision)
        return kept

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Previous:
        return cls(str(raw["repository"]), str(raw["sha256"]), int(raw["revision"]),
                   tuple(int(v) for v in raw.get("pinned", [])), str(raw.get("pinned_sha256", "")),
                   int(raw.get("pinned_revision", 0)))


@dataclass(frozen=True)
class RetireStep:
    """A version rollout's second step, journaled with its first: retire `old` once `version`
    serves beside it everywhere, by applying `config` (version_policy `specific { versions: [version] }`)."""

    version: int
    old: tuple[int, ...]
    config: str

    @property
    def old_text(self) -> str:
        return ", ".join(f"v{v}" for v in self.old) or "no version"

    @property
    def both(self) -> str:
        """What serves between the steps."""
        return f"v{self.version} serves beside {self.old_text}"


@dataclass(frozen=True)
class RolloutPlan:
    fleet: str
    change: str  # load, unload, reload, apply
    model: str
    servers: tuple[PlannedServer, ...]
    waves: int
    wave_size: int = 1
    previous: tuple[Previous, ...] = ()
    new_config: str = ""  # apply: the text applied
    new_sha256: str = ""
    resume_of: int = 0  # the journal this rollout resumes (0: none)
    retire: RetireStep | None = None  # a version rollout's first step: the step after it
    follows: int = 0  # a version rollout's retire step: the journal of its first step (0: none)

    @property
    def action(self) -> str:
        return PREFIX + self.change

    def previous_of(self, repository: str) -> Previous | None:
        return next((p for p in self.previous if p.repository == repository), None)

    def server(self, name: str) -> PlannedServer | None:
        return next((s for s in self.servers if s.name == name), None)

    def to_json(self) -> str:
        return json.dumps({
            "fleet": self.fleet, "change": self.change, "model": self.model, "waves": self.waves,
            "wave_size": self.wave_size, "new_sha256": self.new_sha256, "new_config": self.new_config,
            "resume_of": self.resume_of, "follows": self.follows,
            "retire": None if self.retire is None else {"version": self.retire.version,
                                                        "old": list(self.retire.old),
                                                        "config": self.retire.config},
            "servers": [{"name": s.name, "url": s.url, "wave": s.wave, "repository": s.repository,
                         "ready": s.ready} for s in self.servers],
            "previous": [p.to_json() for p in self.previous]}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RolloutPlan:
        """RolloutJournalError when `text` is no plan (a row written by hand, or cut)."""
        try:
            raw: dict[str, Any] = json.loads(text)
            plan = cls(str(raw["fleet"]), str(raw["change"]), str(raw["model"]),
                       tuple(PlannedServer(str(s["name"]), str(s["url"]), int(s["wave"]),
                                           str(s["repository"]), _flag(s.get("ready")))
                             for s in raw["servers"]),
                       int(raw["waves"]), int(raw.get("wave_size", 1)),
                       tuple(Previous.from_json(p) for p in raw.get("previous", [])),
                       str(raw.get("new_config", "")), str(raw.get("new_sha256", "")),
                       int(raw.get("resume_of", 0)), _retire(raw.get("retire")), int(raw.get("follows", 0)))
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            raise RolloutJournalError(f"the rollout plan in the audit log cannot be read: {exc}") from exc
        if plan.change not in CHANGES:
            raise RolloutJournalError(f"the rollout plan names an unknown change {plan.change!r}")
        return plan


def _retire(raw: Any) -> RetireStep | None:
    if raw is None:
        return None
    return RetireStep(int(raw["version"]), tuple(int(v) for v in raw["old"]), str(raw["config"]))


def _flag(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise TypeError(f"'ready' is {value!r}, not true, false or null")
