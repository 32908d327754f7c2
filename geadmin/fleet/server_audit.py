"""A fleet change audited where it happened: in the workspace of each server it changed.

A rollout's journal (geadmin.fleet.journal) and its per-server apply rows live in the workspace
of whoever ran it. A server whose own geadmin workspace this machine can reach (`Member.home`:
a `[[server]]`'s `home`, or the running embedded stack's workspace for its Triton) gets, in
that workspace too, the rows its own `geadmin audit` and `geadmin config history` need:

- one row per change of it (apply, load, unload, reload; and the rollback, unload, load or reload
  that put it back when the rollout stopped or was restored), naming the fleet rollout's number,
  who ran it (their origin) and from where (host and workspace), with the config diff;
- for an apply, the config revisions: the one it replaced and the one it wrote (and the one put
  back), so `config history` and `config rollback` there see them.

A member without a known workspace, or whose workspace is the operator's, gets nothing more here.
Only an existing workspace is written (one that holds geadmin's database). Recording there
never stops a rollout: a workspace that cannot be written (no such directory, no database,
permissions, a locked or corrupt database) is said in that server's rollout row, and after a
failure nothing more is tried there for the rest of the rollout (a locked database would make
each row wait out the busy timeout).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from geadmin import audit, settings
from geadmin.audit import Actor, Result
from geadmin.db import DB_FILE
from geadmin.diagnose.rollout_plan import RolloutPlan
from geadmin.errors import GeAdminError
from geadmin.repository import revisions

# The change that puts each change back, as the server's own audit calls it.
UNDONE_BY = {"apply": "rollback", "load": "unload", "unload": "load", "reload": "reload"}


@dataclass(frozen=True)
class Config:
    """A config revision to keep in the server's workspace (oldest first)."""

    repository: Path
    data: bytes
    note: str


@dataclass
class ServerAudit:
    """Writes one rollout's rows into its servers' workspaces (see the module docstring)."""

    plan: RolloutPlan
    actor: Actor
    operator_home: Path | None
    journal_id: int
    failed: dict[Path, str] = field(default_factory=dict)  # workspace -> why it could not be written

    def where(self, home: Path | None) -> Path | None:
        """The workspace to record in, or None: unknown, or the operator's own."""
        if home is None:
            return None
        mine = _resolved(self.operator_home or settings.home())
        return None if _resolved(home) == mine else home

    def record(self, name: str, url: str, home: Path | None, action: str, result: Result | str,
               message: str, *, diff: str = "", configs: Sequence[Config] = ()) -> str:
        """One row (and `configs` as revisions) in `home`; "" when written or nothing to write,
        else a line for the server's rollout row saying why not. Never raises."""
        target = self.where(home)
        if target is None:
            return ""
        if target in self.failed:
            return self.failed[target]
        try:
            why = _unusable(target)
            if not why:
                audit.record(action, self.plan.model, result, actor=self.actor, server=url,
                             message=f"{self.headline(name)}: {message}", diff=diff, home=target)
                for config in configs:
                    revisions.record_revision(config.repository, self.plan.model, config.data,
                                              who=self.actor.name, note=config.note, home=target)
        except GeAdminError as exc:  # WorkspaceDatabaseError and its kin: said, never raised
            why = str(exc).splitlines()[0]
        except Exception as exc:  # a path the OS refuses, a bug: said in the row, the rollout goes on
            why = f"{type(exc).__name__}: {exc}"
        if not why:
            return ""
        self.failed[target] = f"not recorded in {name}'s workspace {target}: {why}"
        return self.failed[target]

    def headline(self, name: str) -> str:
        """"fleet apply of 'm' on a (rollout #7 of fleet 'lab', run by alice (cli) on host h,
        workspace /home/alice/.geadmin)"."""
        origin = audit.Origin(self.actor.origin).value
        return (f"fleet {self.plan.change} of {self.plan.model!r} on {name} (rollout #{self.journal_id} of "
                f"fleet {self.plan.fleet!r}, run by {self.actor.name} ({origin}) on {_host()}, workspace "
                f"{_resolved(self.operator_home or settings.home())})")

    def applied(self, repository: str, *, wrote: bool) -> list[Config]:
        """An apply's revisions for the server's config history: the config the rollout replaced
        (kept in the operator's workspace by its plan) and, when `wrote`, the new one."""
        configs = []
        previous = self.kept(repository, f"before fleet rollout #{self.journal_id}")
        if previous is not None:
            configs.append(previous)
        if wrote:
            configs.append(Config(Path(repository), self.plan.new_config.encode(),
                                  f"fleet rollout #{self.journal_id} by {self.actor.name}"))
        return configs

    def kept(self, repository: str, note: str, *, back: bool = False) -> Config | None:
        """The config `repository` held before the rollout, as its plan kept it (`back`: the one a
        put back writes, pinned when geadmin.fleet.pinning says so); None when the plan keeps none
        or the operator's workspace cannot give it back."""
        previous = self.plan.previous_of(repository)
        if previous is None:
            return None
        number = previous.back_revision if back else previous.revision
        try:
            data = revisions.read_revision(Path(repository), self.plan.model, number,
                                           home=self.operator_home).data
        except GeAdminError:
            return None
        return Config(Path(repository), data, note)

    def put_back(self, name: str, url: str, home: Path | None, problem: str, why: str, *,
                 loaded: bool | None = None) -> str:
        """The row of a server put back (or not: `problem`), and for an apply the config put back.
        An apply put back where the model is not loaded (`loaded`; None: as the plan read it before
        the change) is `written`: the file only, nothing that serves changed."""
        server = self.plan.server(name)
        previous = None
        if self.plan.change == "apply" and server is not None and not problem:
            previous = self.kept(server.repository, f"put back by fleet rollout #{self.journal_id}",
                                 back=True)
        if loaded is None:
            loaded = server is None or server.ready is not False
        written = self.plan.change == "apply" and not loaded
        result = Result.FAILED if problem else Result.WRITTEN if written else Result.OK
        message = f"{why}: NOT put back: {problem}" if problem else why
        return self.record(name, url, home, UNDONE_BY[self.plan.change], result, message,
                           configs=[previous] if previous is not None else [])


def _unusable(home: Path) -> str:
    """Why `home` is no workspace to write in, or "". Only a workspace geadmin already keeps
    (its database is there) is written: a mistyped `home` would otherwise start an empty one
    nobody reads, and opening the database makes its directory private (0700) — never done
    to a directory that is not geadmin's, such as /srv or a user's home."""
    if not home.is_dir():
        state = "is not a directory" if home.exists() else "does not exist"
        return f"no such workspace directory ({home} {state})"
    if not (home / DB_FILE).is_file():
        return (f"{home} is not a geadmin workspace (it holds no {DB_FILE}): correct the server's home, "
                "or run geadmin there once (`GEADMIN_HOME=DIR geadmin audit`)")
    return ""


def _resolved(path: Path) -> Path:
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):  # a loop of symlinks, a NUL: compare as written
        return Path(path)


def _host() -> str:
    try:
        return socket.gethostname() or "an unnamed host"
    except OSError:
        return "an unnamed host"
