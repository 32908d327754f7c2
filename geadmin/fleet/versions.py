"""A new model version across the fleet without a gap in serving: two rollouts in waves.

1. Load it next to the old: the config's version_policy becomes `specific { versions: [old...,
   new] }` (geadmin.repository.knobs), applied in waves with the health gate. Triton keeps the
   old version serving while it loads the new; the gate's smoke requests go to the newest
   version, so the new one is warmed and checked on every server before step 2.
2. Retire the old: version_policy `specific { versions: [new] }`, applied the same way.

A failed gate in step 1 puts every server back to the old config, pinned to the old versions when
it would serve the new directory (no version_policy, `latest`, `all`: geadmin.fleet.pinning), so
that the old versions serve alone again; in step 2 back to the step-1 config (both serve). Each
step is one journaled rollout (geadmin.fleet.rollout), and the fleet's rollout lock is held across
both: step 1's plan journals step 2 (`RetireStep`), and step 2's names step 1
(geadmin.diagnose.rollouts). Any exception in either puts back what that step changed. A version
rollout that does not get past step 2 — its process killed between the steps or in step 2, step 2
stopped, refused or cut short — is left between its steps: both versions serve, and the next start
(or here, at once) ends step 1's journal so that it is unresolved, DEGRADED, and named with both
ways out: `geadmin fleet resume ID` runs the retire step (`retire_step`), `geadmin fleet restore
ID` puts back the config before step 1 (pinned the same way).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from geadmin import test_hooks
from geadmin.access.guard import require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Actor, Result
from geadmin.diagnose import rollouts
from geadmin.diagnose.rollout_plan import RetireStep
from geadmin.diagnose.rollouts import Journal
from geadmin.errors import ConfigError, GeAdminError, RepositoryError, RolloutRefusedError, TritonError
from geadmin.fleet.journal import Recorder
from geadmin.fleet.members import Member
from geadmin.fleet.membership import refuse_unproven
from geadmin.fleet.pinning import pinned_config, pinned_note
from geadmin.fleet.rollout import Change, RolloutResult, fleet_lock, rollout
from geadmin.repository.knobs import set_policy
from geadmin.repository.modelconfig import CONFIG_FILE, parse_pbtxt, read_config_text
from geadmin.repository.rewrite import rewrite
from geadmin.triton.client import TritonClient


def roll_version(members: Sequence[Member], model: str, version: int, **kwargs: Any) -> RolloutResult:
    """Serve `version` of `model` everywhere, the old versions retired (see the module
    docstring). `kwargs` are `rollout`'s (wave_size, gate, auth, fleet, home, progress, ...).
    Refused before anything changes: ConfigError for a server without a repository (a setting);
    RolloutRefusedError for a repository without the version's directory, the version already the
    only one served, or a server that cannot say what it serves (Triton's error as the cause)."""
    require(kwargs.get("auth"), GuardedAction.APPLY)  # before anything is read from a server
    refuse_unproven(members, f"fleet version {model} v{version}")  # and before a key goes anywhere
    if not members or any(m.repository is None for m in members):
        raise ConfigError("a version rollout writes the config: every server needs its repository "
                          "(--repository for a shared volume, or repository = ... per [[server]])")
    missing = sorted({str(m.repository) for m in members if m.repository is not None
                      and not (m.repository / model / str(version)).is_dir()})
    if missing:
        raise RolloutRefusedError(f"version {version} of {model} is not in {', '.join(missing)}: copy "
                          f"{model}/{version}/ into every repository first")
    first = members[0]
    assert first.repository is not None
    try:
        text = read_config_text(first.repository / model / CONFIG_FILE)
    except RepositoryError as exc:  # before anything changed: a refusal, with its cause
        raise RepositoryError(f"cannot read the config of {model!r} in {first.repository}: {exc}") from exc
    old = _serving(first, model, kwargs.get("timeout_s", 30.0))
    if old == [version]:
        raise RolloutRefusedError(f"{first.name} already serves only version {version} of {model}")
    both = _with_versions(text, sorted({*old, version}))
    retire = RetireStep(version, tuple(old), _with_versions(both, [version]))
    say = kwargs.pop("progress", None) or (lambda _: None)
    if pinned_config(text, first.repository / model, retire) is not None:
        say(f"[load v{version} beside {retire.old_text}] if this step stops, the config put back pins "
            f"{retire.old_text}: {model}/{version}/ is present, and the config before, unpinned, would "
            "serve it")
    with fleet_lock(kwargs.get("fleet") or "fleet", kwargs.get("home")):  # across both steps
        loaded = rollout(members, Change.APPLY, model, new_config=both.encode(), retire=retire,
                         progress=lambda line: say(f"[load v{version} beside {retire.old_text}] {line}"),
                         **kwargs)
        if not loaded.ok:
            pins = pinned_note(rollouts.read(loaded.journal_id, home=kwargs.get("home")).plan) \
                if loaded.journal_id else ""
            return replace(loaded, headline=f"VERSION ROLLOUT STOPPED loading v{version} beside "
                                            f"{retire.old_text}: {loaded.headline.split(': ', 1)[-1]}"
                                            + (f"; {pins}" if pins else ""))
        test_hooks.fault_point("version.between_steps")
        step_one = rollouts.read(loaded.journal_id or 0, home=kwargs.get("home"))
        return retire_step(members, step_one, progress=say, **kwargs)


def retire_step(members: Sequence[Member], first: Journal, **kwargs: Any) -> RolloutResult:
    """Step 2 of the version rollout whose step 1 is `first` (its plan's `retire`): the old
    versions retired on `members`, in waves with the gate. When it does not end done (stopped and
    put back, refused, or cut short by an exception, which is raised again), `first` is ended
    `failed` with every server it changed left changed, unless already ended so: unresolved, both
    versions serving. `kwargs` are `rollout`'s."""
    retire, model = first.plan.retire, first.plan.model
    assert retire is not None
    actor = require(kwargs.get("auth"), GuardedAction.APPLY)
    say = kwargs.pop("progress", None) or (lambda _: None)
    home = kwargs.get("home")
    try:
        retired = rollout(members, Change.APPLY, model, new_config=retire.config.encode(), follows=first.id,
                          progress=lambda line: say(f"[retire {retire.old_text}] {line}"), **kwargs)
    except BaseException as exc:
        text = f": {str(exc).splitlines()[0]}" if str(exc) else ""
        _left_between(first.id, actor, home, f"cut short by {type(exc).__name__}{text}")
        raise
    if not retired.ok:
        _left_between(first.id, actor, home, retired.headline)
        why = retired.headline.split(": ", 1)[-1]
        return replace(retired, headline=f"VERSION ROLLOUT STOPPED retiring {retire.old_text} "
                                         f"({retire.both}: resume or restore rollout #{first.id}): {why}")
    return replace(retired, headline=f"VERSION ROLLOUT DONE: v{retire.version} of {model} serves on "
                                     f"{len(members)} server(s), {retire.old_text} retired, no gap")


def _left_between(first_id: int, actor: Actor, home: Path | None, why: str) -> None:
    """Step 1's journal ended `failed`, every server it changed left changed, while it is still
    between its steps (a retire step ended done, or an end written already, leaves it be)."""
    with contextlib.suppress(GeAdminError):  # else the next start ends it `interrupted`
        first = rollouts.read(first_id, home=home)
        if not first.between_steps:
            return
        recorder = Recorder(first.plan, actor, home)
        recorder.id = first.id
        retire = first.plan.retire
        assert retire is not None
        recorder.end(Result.FAILED, f"the retire step did not finish: {why}\n{retire.both} on "
                     f"{rollouts.names(first.touched)}", first.touched)


def _with_versions(text: str, versions: list[int]) -> str:
    """`text` with version_policy `specific` `versions`, its comments and layout kept."""
    config = parse_pbtxt(text)
    set_policy(config, ", ".join(map(str, versions)))
    return rewrite(text, config).text


def _serving(member: Member, model: str, timeout_s: float) -> list[int]:
    """The versions of `model` READY on `member` now."""
    try:
        ca = str(member.tls_ca) if member.tls_ca is not None else None
        with TritonClient(member.url, admin_key=member.spec.admin_key, timeout_s=timeout_s,
                          tls_ca=ca) as client:
            index = client.repository_index()
    except TritonError as exc:
        raise RolloutRefusedError(f"cannot read what {member.name} serves: {exc}") from exc
    return sorted(int(e.version) for e in index
                  if e.name == model and e.state.value == "READY" and e.version.isdigit())
