"""The way back from a rollout cut short: every server it changed put back as it was before.

A rollout puts back the servers it changed when it stops (`put_back`, from
geadmin.fleet.rollout); `restore` does it for an unresolved rollout by its number, after a
restart (`geadmin fleet restore ID`, the Fleet page's Restore), and ends its journal. An
apply's previous config, kept as a revision by the plan (geadmin.fleet.journal), is written
back byte-identical (a version rollout's first step: pinned to the versions that served when
the file would serve the new one, geadmin.fleet.pinning); a load, unload or reload returns the
model to the state the plan recorded.

A restore never overwrites a config changed since the rollout (neither the previous nor the
new file on disk): that repository is reported as not put back, with the revision to roll
back to by hand (`geadmin config rollback MODEL N`).

A restore (and a resume) finds the rollout's servers again with `journal_servers`: a URL in a
journal proves nothing, so a server gets a key only as the rollout's fleet (or the fleet given)
proves it now, or, for an ad-hoc rollout, as a configured server at the same URL (the servers
file binds its key to that address). A planned server found no such way, or not proven to
belong now, is not touched: its row says why and what to pass.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Actor, AuditEntry, Result
from geadmin.diagnose import rollouts
from geadmin.diagnose.rollout_plan import PlannedServer, Previous, RolloutPlan
from geadmin.diagnose.rollouts import Journal
from geadmin.errors import RolloutBusyError, TritonError
from geadmin.fleet.discovery import AD_HOC, CONFIGURED, discover, fleet_named, fleets
from geadmin.fleet.journal import Recorder
from geadmin.fleet.members import Member
from geadmin.fleet.pinning import pinned_note
from geadmin.fleet.server_audit import ServerAudit
from geadmin.ops.models.actions import ModelAction, run_action
from geadmin.ops.models.apply import apply_config
from geadmin.ops.models.rollout_recovery import close_rollout, rollout_lock
from geadmin.repository import revisions, store
from geadmin.repository.modelconfig import CONFIG_FILE
from geadmin.triton.client import TritonClient

UNDO = {"load": ModelAction.UNLOAD, "unload": ModelAction.LOAD, "reload": ModelAction.RELOAD}
# What putting a change back needs the caller to be authorized for.
RESTORE_NEEDS = {"apply": GuardedAction.ROLLBACK, "load": GuardedAction.UNLOAD, "unload": GuardedAction.LOAD,
                 "reload": GuardedAction.RELOAD}


def undo_of(change: str, ready_before: bool | None, client: TritonClient, model: str) -> ModelAction | None:
    """What returns the model on one server to its state before `change`: READY there before,
    loaded again if it is not READY now; not READY before, unloaded if it is loaded now; None:
    it is as it was. Not the opposite of the change: a load where the model served already is a
    reload, and unloading it there took a serving model down. A reload where it served is
    reloaded again (the files it read are not the change's to undo). A plan without the state
    (journaled by an older geadmin), or a server whose index does not answer, gets the opposite."""
    if ready_before is None:
        return UNDO[change]
    try:
        loaded = _loaded_now(client, model)
    except TritonError:
        return UNDO[change]  # it fails too, and says why: never "put back" unseen
    if ready_before:
        return ModelAction.RELOAD if change == "reload" and loaded else None if loaded else ModelAction.LOAD
    return ModelAction.UNLOAD if loaded else None


def put_back(plan: RolloutPlan, touched: Sequence[str], clients: Mapping[str, TritonClient], *,
             auth: Authorization | None, home: Path | None, note: str, timeout_s: float = 60.0,
             lost: Mapping[str, Sequence[str]] | None = None, gone: Collection[str] = (),
             absent: Mapping[str, str] | None = None, not_loaded: set[str] | None = None) -> dict[str, str]:
    """Each server of `touched` put back, newest first: server -> "" or why not. An apply's
    previous config is written back byte-identical (once per repository, read back to check)
    and reloaded where the model is loaded; a load, unload or reload returns the model to its
    state before (`undo_of`; an unload's `lost` models loaded again). A server of `gone` (gone
    for good, the operator says: a replica scaled in) has nothing to reload: an apply's file is
    put back all the same. `absent`: why a server has no client (default: not a member now);
    `not_loaded` gets the servers where nothing was reloaded (the model is not loaded). Refused
    (NotAuthorizedError) before anything when `auth` does not cover putting the change back; then
    never raises for one server: it goes on."""
    unloaded = not_loaded if not_loaded is not None else set()
    actor = require(auth, RESTORE_NEEDS[plan.change])
    problems: dict[str, str] = {}
    files: dict[str, str] = {}  # repository -> "" (back) or why not
    for name in reversed(list(dict.fromkeys(touched))):
        server, client = plan.server(name), clients.get(name)
        try:
            if server is not None and client is None and name in gone:
                if plan.change == "apply" and server.repository not in files:
                    files[server.repository] = _file_back_without(plan, server, actor.name, home, note)
                problems[name] = files.get(server.repository, "") if plan.change == "apply" else ""
                unloaded.add(name)  # nothing reloaded on a server gone for good
                continue
            if server is None or client is None:
                why = (absent or {}).get(name) or not_found(plan, name)
                problems[name] = (f"{why}: put it back by hand, or, if it is gone for good, restore with "
                                  f"`--gone {name}`")
                continue
            if plan.change != "apply":
                undo = undo_of(plan.change, server.ready, client, plan.model)
                results = run_action(client, undo, [plan.model], auth=auth, settle_timeout_s=timeout_s) \
                    if undo is not None else []
                if (lost or {}).get(name):  # the models the unload took down with it
                    results += run_action(client, ModelAction.LOAD, list((lost or {})[name]), auth=auth,
                                          settle_timeout_s=timeout_s)
                problems[name] = "; ".join(r.message.splitlines()[0] for r in results if not r.ok)
                continue
            reloaded = False
            if server.repository not in files:
                files[server.repository], reloaded = _file_back(plan, server, client, auth, home, note)
            again, loaded = ("", True) if reloaded or files[server.repository] else \
                reload_if_loaded(client, plan.model, auth, timeout_s)
            problems[name] = files[server.repository] or again
            unloaded.update([] if loaded else [name])
        except Exception as exc:  # any failure of one server: say it, put back the others
            problems[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return problems


def _file_to_put_back(plan: RolloutPlan, server: PlannedServer, home: Path | None) -> tuple[bytes, str, str]:
    """(the config the rollout kept for the server's repository, the hash on disk it may replace,
    why it may not: ""); no bytes when the file is back already."""
    previous = plan.previous_of(server.repository)
    if previous is None:
        return b"", "", f"the plan keeps no previous config for {server.repository}"
    repository, number = Path(server.repository), previous.back_revision
    kept = revisions.read_revision(repository, plan.model, number, home=home)
    if kept.sha256 != previous.back_sha256:
        return b"", "", f"revision {number} of {plan.model!r} is not the config the rollout kept"
    if store.read_config(repository, plan.model).data == kept.data:
        return b"", "", ""
    found, edited = changed_since(plan, repository, previous)
    if edited:
        return b"", found, (f"{edited}: not overwritten; roll back by hand: `geadmin config rollback "
                            f"{plan.model} {number}`")
    return kept.data, found, ""


def _file_back_without(plan: RolloutPlan, server: PlannedServer, who: str, home: Path | None,
                       note: str) -> str:
    """A gone server's repository: its previous config written back, nothing reloaded; "" or why not."""
    data, found, problem = _file_to_put_back(plan, server, home)
    if data:
        store.write_config(Path(server.repository), plan.model, data, expected_sha256=found, who=who,
                           note=note, home=home)
    return problem


def _file_back(plan: RolloutPlan, server: PlannedServer, client: TritonClient, auth: Authorization | None,
               home: Path | None, note: str) -> tuple[str, bool]:
    """(why the repository's previous config is not back, or ""; whether `client` reloaded it)."""
    data, found, problem = _file_to_put_back(plan, server, home)
    if not data:
        return problem, False
    repository = Path(server.repository)
    path = repository / plan.model / CONFIG_FILE
    result = apply_config(client, repository, plan.model, data, expected_sha256=found, auth=auth,
                          home=home, action="rollback", validate=False, note=note)
    if store.read_config(repository, plan.model).data != data:
        back = store.read_config(repository, plan.model).data
        return (f"{path} is not the file it was (sha256 {_short(back)}, was {_short(data)}): "
                f"{result.message.splitlines()[0]}"), False
    return "", result.outcome.value == "applied"


def changed_since(plan: RolloutPlan, repository: Path, previous: Previous | None) -> tuple[str, str]:
    """(the sha256 of the model's config in `repository` now, and "" when it is the config before
    the rollout or the one it rolls out, else why it may not be written: someone edited it since).
    A put back and a resume write over those two only (detected, never overwritten); the config
    before pinned to the versions that served (geadmin.fleet.pinning) is the config before too."""
    found = store.read_config(repository, plan.model).sha256
    before = {previous.sha256, previous.pinned_sha256} if previous is not None else set()
    if found in {plan.new_sha256, *before} - {""}:
        return found, ""
    return found, (f"{repository / plan.model / CONFIG_FILE} changed since the rollout (sha256 {found[:12]}, "
                   "neither the previous nor the new config)")


def reload_if_loaded(client: TritonClient, model: str, auth: Authorization | None,
                     timeout_s: float) -> tuple[str, bool]:
    """(why the reload failed, or ""; whether the model was loaded: reloaded, or tried)."""
    if not is_loaded(client, model):
        return "", False
    result = run_action(client, ModelAction.RELOAD, [model], auth=auth, settle_timeout_s=timeout_s)[0]
    return ("" if result.ok else result.message.splitlines()[0]), True


def is_loaded(client: TritonClient, model: str) -> bool:
    try:
        return _loaded_now(client, model)
    except TritonError:
        return False


def _loaded_now(client: TritonClient, model: str) -> bool:
    """A version of `model` READY or LOADING on `client`'s server; TritonError when not read."""
    return any(m.name == model and m.state.value in ("READY", "LOADING") for m in client.repository_index())


def _short(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


def not_found(plan: RolloutPlan, name: str) -> str:
    """Why a server of `plan` has no member now, and for an ad-hoc rollout what to pass."""
    server = plan.server(name)
    if plan.fleet != AD_HOC or server is None:
        return f"{name} is not a member of fleet {plan.fleet!r} now"
    return (f"{name} ({server.url}) is no configured server now, and an ad-hoc rollout's server gets a key "
            "only as a configured server at the same URL: pass `--source SRC` or `--fleet NAME` that finds "
            "it with its key")


def journal_servers(plan: RolloutPlan, *, fleet: str | None = None,
                    sources: Sequence[str] = ()) -> list[Member]:
    """The members to restore or resume `plan` on, each keyed only where it is proven to belong:
    the fleet or sources given, else the plan's fleet while it is named, else (an ad-hoc rollout,
    or a fleet removed since) the configured servers at a URL the plan names, each with its own
    key and the plan's name. ConfigError: the servers file cannot be read."""
    if fleet or sources:
        return list(discover(fleet_named(fleet, sources)).members)
    if plan.fleet != AD_HOC and plan.fleet in fleets():
        return list(discover(fleet_named(plan.fleet)).members)
    planned = {s.url.rstrip("/"): s.name for s in plan.servers}
    return [replace(m, spec=replace(m.spec, name=planned[m.url.rstrip("/")]))
            for m in discover(fleet_named(None, (CONFIGURED,))).members if m.url.rstrip("/") in planned]


def clients_for(plan: RolloutPlan, members: Sequence[Member],
                timeout_s: float) -> tuple[dict[str, TritonClient], dict[str, str]]:
    """A client per planned server that is a member now at the same URL and trusted (its key is
    the member's); and why each other planned server has none."""
    by_name = {m.name: m for m in members}
    found, absent = {}, {}
    for server in plan.servers:
        member = by_name.get(server.name)
        if member is None or member.url.rstrip("/") != server.url.rstrip("/"):
            absent[server.name] = not_found(plan, server.name) + (
                f" at {server.url} (it is at {member.url})" if member is not None else "")
        elif not member.trust.trusted:  # a write goes to a member proven to belong, never to an address
            absent[server.name] = f"{server.name} is not proven to belong now: {member.trust.why}"
        else:
            ca = str(member.tls_ca) if member.tls_ca is not None else None  # pinned, as the rollout's
            found[server.name] = TritonClient(member.url, admin_key=member.spec.admin_key,
                                              timeout_s=timeout_s, load_timeout_s=timeout_s, tls_ca=ca)
    return found, absent


def restore(journal_id: int, members: Sequence[Member], *, auth: Authorization | None,
            home: Path | None = None, timeout_s: float = 60.0,
            gone: Collection[str] = ()) -> tuple[Journal, dict[str, str], AuditEntry]:
    """Put back every server an unresolved rollout touched (see `put_back`; `gone`: servers gone
    for good) and end its journal: `rolled_back` when every one is back, else `failed` naming those
    left changed. A version rollout's first step: its retire step cut short is restored first, in
    the same call (its journal ends naming this one), so the file goes back newest first.
    RolloutBusyError when it is not unresolved (running, done, restored or resumed)."""
    actor = require(auth, GuardedAction.ROLLBACK)  # before anything is read: putting back is a rollback
    journal = rollouts.read(journal_id, home=home)
    with rollout_lock(journal.plan.fleet, home=home):
        journal = rollouts.read(journal_id, home=home)
        if journal.open:  # its process died, and no start closed it yet
            close_rollout(journal, actor=actor, home=home)
            journal = rollouts.read(journal_id, home=home)
        if not journal.unresolved:
            state = journal.end.result if journal.end is not None else "resumed"
            by = f", settled by rollout #{journal.resumed_by}" if journal.resumed_by else ""
            raise RolloutBusyError(f"rollout #{journal_id} has nothing to restore (it ended {state}{by})")
        for step in _retire_steps_cut_short(journal, actor, home):  # newest first
            _restore_one(step, members, actor=actor, auth=auth, home=home, timeout_s=timeout_s, gone=gone,
                         before=f", before rollout #{journal.id} it follows")
        problems, end = _restore_one(journal, members, actor=actor, auth=auth, home=home, timeout_s=timeout_s,
                                     gone=gone)
        if journal.plan.follows:  # a version rollout's retire step put back: its first step is left between
            first = rollouts.read(journal.plan.follows, home=home)
            if first.open:
                close_rollout(first, actor=actor, home=home)
    return rollouts.read(journal_id, home=home), problems, end


def _retire_steps_cut_short(first: Journal, actor: Actor, home: Path | None) -> list[Journal]:
    """A version rollout's retire steps that follow `first` and were cut short (closed here when
    their process died): they changed the file after `first` did, so they are put back before it."""
    steps = [j for j in rollouts.journals(home=home, fleet=first.plan.fleet, limit=10_000)
             if first.plan.retire is not None and j.plan.follows == first.id]
    for step in (j for j in steps if j.open):  # its process died, and no start closed it yet
        close_rollout(step, actor=actor, home=home)
    return [j for j in (rollouts.read(s.id, home=home) for s in steps) if j.unresolved]


def _restore_one(journal: Journal, members: Sequence[Member], *, actor: Actor, auth: Authorization | None,
                 home: Path | None, timeout_s: float, gone: Collection[str],
                 before: str = "") -> tuple[dict[str, str], AuditEntry]:
    """`journal`'s servers put back and its journal ended (under the fleet's lock); `before`: why
    it is put back now (another restore it comes before)."""
    recorder = Recorder(journal.plan, actor, home)
    recorder.id = journal.id
    clients, absent = clients_for(journal.plan, members, timeout_s)
    try:
        left, not_loaded = journal.left_changed, set[str]()
        problems = put_back(journal.plan, left, clients, auth=auth, home=home, timeout_s=timeout_s,
                            note=f"restore of fleet rollout #{journal.id}{before}", gone=gone, absent=absent,
                            not_loaded=not_loaded)
        served = _old_versions_served(journal.plan, [n for n in left if not problems.get(n)], clients)
    finally:
        for client in clients.values():
            client.close()
    on_server, by_name = ServerAudit(journal.plan, actor, home, journal.id), {m.name: m for m in members}
    for name in left:
        server, member = journal.plan.server(name), by_name.get(name)
        unrecorded = on_server.put_back(name, member.url, member.home, problems.get(name, ""),
                                        f"restore of fleet rollout #{journal.id}{before}",
                                        loaded=name not in not_loaded) if member else ""
        said = "; ".join(filter(None, (problems.get(name, ""), unrecorded)))
        recorder.step(name, server.wave if server else 0, rollouts.NOT_RESTORED if problems.get(name)
                      else rollouts.RESTORED, said)
    bad = [name for name in left if problems.get(name)]
    text = (f"RESTORED rollout #{journal.id}{before}: {len(left)} server(s) put back ({rollouts.names(left)})"
            if not bad else f"RESTORE INCOMPLETE for rollout #{journal.id}{before}: NOT put back on "
            f"{', '.join(bad)}: " + "; ".join(f"{n}: {problems[n]}" for n in bad))
    pins = pinned_note(journal.plan) if len(bad) < len(left) else ""
    end = recorder.end(Result.FAILED if bad else Result.ROLLED_BACK,
                       text + (f"; {pins}" if pins else "") + served, bad)
    return problems, end


def _old_versions_served(plan: RolloutPlan, restored: Sequence[str],
                         clients: Mapping[str, TritonClient]) -> str:
    """A version rollout's first step put back: "" when each restored server serves the old
    versions alone again, else what serves (read, not assumed): a config put back without a
    pinned version_policy serves the latest version directory, the new one included."""
    retire = plan.retire
    if retire is None:
        return ""
    off = []
    for name in (n for n in restored if n in clients):
        try:
            index = clients[name].repository_index()
        except TritonError as exc:
            off.append(f"{name}: what it serves cannot be read ({str(exc).splitlines()[0]})")
            continue
        ready = sorted(int(e.version) for e in index
                       if e.name == plan.model and e.state.value == "READY" and e.version.isdigit())
        if tuple(ready) != retire.old:
            off.append(f"{name} serves {', '.join(f'v{v}' for v in ready) or 'no version'}")
    if not off:
        return ""
    new, pinned = f"{plan.model}/{retire.version}/", ", ".join(map(str, retire.old))
    return (f"; but NOT {retire.old_text} alone as before: {'; '.join(off)} (what the config put back "
            f"serves with {new} in the repository: remove {new}, or set `versions: [{pinned}]` in its "
            f"version_policy, to serve {retire.old_text} alone)")
