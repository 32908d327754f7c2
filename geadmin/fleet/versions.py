"""A new model version across the fleet without a gap in serving: two rollouts in waves.

1. Load it next to the old: the config's version_policy becomes `specific { versions: [old...,
   new] }` (geadmin.repository.knobs), applied in waves with the health gate. Triton keeps the
   old version serving while it loads the new; the gate's smoke requests go to the newest
   version, so the new one is warmed and checked on every server before step 2.
2. Retire the old: version_policy `specific { versions: [new] }`, applied the same way.

A failed gate in step 1 puts every server back to the old config (only the old version
serves); in step 2 back to the step-1 config (both serve). Each step is one journaled rollout
(geadmin.fleet.rollout): any exception in either puts back what that step changed, and a
process killed in either leaves a journal the next start reports (`geadmin fleet restore ID`
puts that step's servers back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from geadmin.access.guard import require
from geadmin.access.roles import GuardedAction
from geadmin.errors import ConfigError, RepositoryError, RolloutRefusedError, TritonError
from geadmin.fleet.members import Member
from geadmin.fleet.membership import refuse_unproven
from geadmin.fleet.rollout import Change, RolloutResult, rollout
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
    say = kwargs.pop("progress", None) or (lambda _: None)
    shown_old = ", ".join(f"v{v}" for v in old) or "no version"
    loaded = rollout(members, Change.APPLY, model, new_config=both.encode(),
                     progress=lambda line: say(f"[load v{version} beside {shown_old}] {line}"), **kwargs)
    if not loaded.ok:
        return replace(loaded, headline=f"VERSION ROLLOUT STOPPED loading v{version} beside {shown_old}: "
                                        f"{loaded.headline.split(': ', 1)[-1]}")
    retired = rollout(members, Change.APPLY, model, new_config=_with_versions(both, [version]).encode(),
                      progress=lambda line: say(f"[retire {shown_old}] {line}"), **kwargs)
    if not retired.ok:
        return replace(retired, headline=f"VERSION ROLLOUT STOPPED retiring {shown_old} (v{version} serves "
                                         f"beside it): {retired.headline.split(': ', 1)[-1]}")
    return replace(retired, headline=f"VERSION ROLLOUT DONE: v{version} of {model} serves on "
                                     f"{len(members)} server(s), {shown_old} retired, no gap")


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
