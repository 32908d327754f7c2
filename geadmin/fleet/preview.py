"""What a fleet rollout would do, said before it starts: the servers, which of them are
read-only (and so refuse the whole rollout), the waves, the repositories it writes and, for an
apply, the change to the config as a diff. The Fleet page shows it and asks for a confirmation;
nothing here changes anything.

The refusal is the rollout's own (geadmin.fleet.membership.refuse_unproven), asked early;
the waves are cut as the rollout cuts them (members in order, `wave_size` at a time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from geadmin.errors import FleetError, GeAdminError
from geadmin.fleet.members import Member
from geadmin.fleet.membership import refuse_unproven
from geadmin.repository.modelconfig import CONFIG_FILE, read_config_bytes
from geadmin.repository.revisions import config_diff

READ_LIMIT = 1 << 20  # a config file bigger than this is not a config: not read for the diff


@dataclass(frozen=True)
class Preview:
    fleet: str
    subject: str  # "apply echo", "reload echo", "version 2 of echo"
    servers: tuple[str, ...]
    waves: tuple[tuple[str, ...], ...]
    refused: str  # the rollout's refusal when a member is read-only, else ""
    repositories: tuple[str, ...]  # the repositories written (apply, new version)
    diff: str = ""  # an apply: the unified diff of the config, first repository's file -> new
    added: int = 0
    removed: int = 0

    def headline(self) -> str:
        waves = "; ".join(f"wave {n}: {', '.join(w)}" for n, w in enumerate(self.waves, start=1))
        return (f"{self.subject} on fleet {self.fleet!r}: {len(self.servers)} server(s) in "
                f"{len(self.waves)} wave(s) ({waves})")


def waves(members: Sequence[Member], wave_size: int) -> list[list[Member]]:
    size = max(1, wave_size)
    return [list(members[i:i + size]) for i in range(0, len(members), size)]


def missing_repository(members: Sequence[Member]) -> list[str]:
    """The names of the members with no known model repository (an apply cannot write for them)."""
    return [m.name for m in members if m.repository is None]


def with_repository(members: Sequence[Member], repository: Path) -> tuple[Member, ...]:
    """`members`, each without a repository of its own given `repository` (a shared volume)."""
    return tuple(m if m.repository is not None else replace(m, repository=repository) for m in members)


def preview(members: Sequence[Member], fleet: str, action: str, model: str, *, wave_size: int,
            subject: str = "", new_config: bytes | None = None, writes: bool = False) -> Preview:
    """The rollout of `action` on `model` over `members`, described. `writes`: the change writes
    the config (apply, new version); `new_config`: an apply's new text, diffed against the file
    in the first member's repository."""
    refused = ""
    try:
        refuse_unproven(members, f"fleet {action} {model}")
    except FleetError as exc:
        refused = str(exc)
    repositories = sorted({str(m.repository) for m in members if m.repository is not None}) if writes else []
    diff, added, removed = "", 0, 0
    if new_config is not None:
        first = next((m.repository for m in members if m.repository is not None), None)
        before = _read(first / model / CONFIG_FILE) if first is not None else b""
        diff = config_diff(before, new_config, model, "served file", "new")
        body = [line for line in diff.splitlines() if not line.startswith(("+++", "---"))]
        added = sum(1 for line in body if line.startswith("+"))
        removed = sum(1 for line in body if line.startswith("-"))
    return Preview(fleet, subject or f"{action} {model}", tuple(m.name for m in members),
                   tuple(tuple(m.name for m in w) for w in waves(members, wave_size)), refused,
                   tuple(repositories), diff, added, removed)


def _read(path: Path) -> bytes:
    try:
        return read_config_bytes(path)[:READ_LIMIT]
    except (OSError, GeAdminError):
        return b""
