"""The guard is in the core, not only in the pages: every core function that changes a server,
the repository, the stack or the users refuses to run without an authorization from
geadmin.access.guard, or with one that lacks its action, BEFORE it touches anything — no
connection to the server (a real listening socket counts them), no file written in the
repository or the workspace, no driver called, no users file. A completeness check finds
the public functions of geadmin/ops, geadmin/stack and geadmin/diagnose whose names say they
change something and fails when one is neither guarded here nor exempted with its reason."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import re
import select
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.access import guard
from geadmin.access.guard import Authorization
from geadmin.access.identity import Identity, Mode
from geadmin.access.roles import REQUIRED_ROLE, GuardedAction, Role
from geadmin.access.users import UsersFile
from geadmin.audit import Actor
from geadmin.diagnose import rollout_plan, rollouts
from geadmin.diagnose.npu_faults import PlanStep, StepKind
from geadmin.errors import GeAdminError, NotAuthorizedError, PerfAnalyzerMissingError
from geadmin.fleet import restore, resume, rollout, runs, versions
from geadmin.fleet.members import Member, Trust
from geadmin.ops import monitoring
from geadmin.ops import runs as background
from geadmin.ops.bench import load_test as bench
from geadmin.ops.bench.background import LOAD_TEST, start_load_test
from geadmin.ops.bench.params import BenchSettings
from geadmin.ops.capacity import capture
from geadmin.ops.capacity import sweep as capacity_sweep
from geadmin.ops.infer.inputs import InputSource, SourceKind
from geadmin.ops.models import actions, apply, create, explained_load, preview, put_back
from geadmin.ops.npu import remedy
from geadmin.ops.runs import Run
from geadmin.ops.tune import apply as tune_apply
from geadmin.ops.tune import joint_run as tune_joint_run
from geadmin.ops.tune import objective as tune_objective
from geadmin.ops.tune import search as tune
from geadmin.ops.tune.joint import JointChoice, Pick
from geadmin.ops.tune.outcome import Trial, TuneResult
from geadmin.ops.tune.search import TuneSettings
from geadmin.ops.tune.space import Candidate
from geadmin.stack import drivers
from geadmin.stack.drivers import ExitRecord, ServiceStatus
from geadmin.telemetry.alerting.objectives import Objective
from geadmin.telemetry.history.traffic import RecordedLoad
from geadmin.telemetry.sources.fault_table import FaultLevel
from geadmin.triton.client import TritonClient
from geadmin.triton.servers import ServerSpec
from tests.support.auth import admin_auth, auth_as
from tests.support.fault_reports import HBM_ECC, drain_plan, impact, report

ROOT = Path(__file__).resolve().parents[2]


def objective_plan() -> tune_objective.ObjectivePlan:
    now = datetime.now(timezone.utc)
    return tune_objective.ObjectivePlan(Objective("m", p99_ms=50.0),
                                        RecordedLoad("m", now - timedelta(hours=1), now, 5.0, 8.0, samples=3))


def joint_run(server: str) -> tune_joint_run.JointRun:
    """A joint choice that fits, for one model: applying it would change the server."""
    pick = Pick("m", Trial(Candidate(8), "objective", True, memory_bytes=1 << 20))
    run = TuneResult("m", server, TuneSettings("m"), Candidate(4), (pick.trial,), pick.trial, CONFIG, id=1)
    return tune_joint_run.JointRun((run,), (objective_plan(),), {"m": (0,)}, {0: 1 << 30},
                                   JointChoice((pick,), True))


CONFIG = 'name: "m"\nbackend: "python"\nmax_batch_size: 4\n'
NEW_USER_PASSWORD = "a long enough password 1"


class RecordingDriver:
    """A stack driver double that only records what it is asked (the guard's refusal must
    come before any call); the real drivers are tested in test_compose_driver / stack tests."""

    kind = "local"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def services(self) -> list[ServiceStatus]:
        return []

    def history(self, service: str) -> list[ExitRecord]:
        return []

    def restart(self, service: str) -> None:
        self.calls.append(("restart", service))

    def stop(self, service: str) -> None:
        self.calls.append(("stop", service))

    def start(self, service: str) -> None:
        self.calls.append(("start", service))

    def logs(self, service: str, tail: int = 200) -> list[str]:
        return []


# The listener hangs up at once, so no call waits this out; it only has to outlast a starved host
# (at 1 s a call could give up before it had connected).
CALL_TIMEOUT_S = 10


@dataclass
class World:
    """What a mutating call could touch: a server (a real listener nobody else talks to),
    a model repository, the workspace, the users file and a stack driver."""

    listener: socket.socket
    client: TritonClient
    repository: Path
    home: Path
    users: UsersFile
    driver: RecordingDriver
    accepted: list[int] = field(default_factory=lambda: [0])
    accepting: threading.Lock = field(default_factory=threading.Lock)

    def connections(self) -> int:
        """Every connection made so far, also one still in the listen backlog: on a starved
        host the caller can give up before the hang-up thread gets to accept it."""
        hang_up_pending(self.listener, self.accepted, self.accepting, wait_s=0)
        return self.accepted[0]

    def snapshot(self) -> dict[str, str]:
        seen = {}
        for top in (self.repository, self.home):
            for path in sorted(top.rglob("*")):
                seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        return seen


@pytest.fixture(scope="module")
def users_with_olga(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One users file for the module: the password hash is slow on purpose (0.15 s a world)."""
    path = tmp_path_factory.mktemp("users") / "users.toml"
    UsersFile(path).add("olga", Role.OPERATOR, NEW_USER_PASSWORD, auth=admin_auth())
    return path


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, users_with_olga: Path) -> Iterator[World]:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("GEADMIN_HOME", str(home))
    repository = tmp_path / "repo"
    (repository / "m" / "1").mkdir(parents=True)
    (repository / "m" / "config.pbtxt").write_text(CONFIG)
    shutil.copy2(users_with_olga, home / "users.toml")  # with its 0600 mode
    users = UsersFile(home / "users.toml")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    client = TritonClient(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout_s=CALL_TIMEOUT_S,
                          load_timeout_s=CALL_TIMEOUT_S)
    world = World(listener, client, repository, home, users, RecordingDriver())
    stop = threading.Event()
    hanging_up = threading.Thread(target=hang_up_on_every_caller,
                                  args=(listener, world.accepted, world.accepting, stop))
    hanging_up.start()
    try:
        yield world
    finally:
        stop.set()
        hanging_up.join(timeout=5)
        listener.close()


def hang_up_on_every_caller(listener: socket.socket, accepted: list[int], accepting: threading.Lock,
                            stop: threading.Event) -> None:
    """Counts each connection and closes it at once: a call past the guard fails in
    milliseconds (a listener that never answered made each wait out its timeout)."""
    while not stop.is_set():
        hang_up_pending(listener, accepted, accepting, wait_s=0.05)


def hang_up_pending(listener: socket.socket, accepted: list[int], accepting: threading.Lock,
                    wait_s: float) -> None:
    """Accepts, counts and closes what waits in the backlog (after up to `wait_s`); under the
    lock, so the test's own count and the thread never both wait in `accept`."""
    if wait_s and not _waiting(listener, wait_s):
        return
    with accepting:
        while _waiting(listener, 0):
            conn, _ = listener.accept()
            accepted[0] += 1  # before the close: the caller returns on the close, then the test reads this
            conn.close()


def _waiting(listener: socket.socket, wait_s: float) -> bool:
    """Does a caller wait in the backlog (after up to `wait_s`)? poll, not select: select fails
    on a descriptor numbered over 1024, and a worker that ran many modules before this one
    holds that many (the run's other modules' clients and servers)."""
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    return bool(poller.poll(wait_s * 1000))


def member(w: World) -> Member:
    """The listener as a fleet member, reading the world's repository."""
    return Member(ServerSpec("s", w.client.url), "test", repository=w.repository,
                  trust=Trust(True, "the test's own listener"))


def reload_plan(w: World) -> rollout_plan.RolloutPlan:
    server = rollout_plan.PlannedServer("s", w.client.url, 1)
    return rollout_plan.RolloutPlan("lab", "reload", "m", (server,), 1)


def interrupted_rollout(w: World) -> tuple[int, Path]:
    """A reload rollout of the listener, journaled and ended `interrupted` (as the next start
    ends one whose process was killed), in a workspace beside the world's (so planting it is
    not a write the refusal tests would see): what restore and resume take."""
    plan, home = reload_plan(w), w.home.parent / "journal_home"
    started = audit.record(plan.action, "m", audit.Result.STARTED, server="lab",
                           message=f"planted\n{rollouts.PLAN}: {plan.to_json()}", home=home)
    audit.record(plan.action, "m", audit.Result.STEP, server="s", home=home,
                 message=f"planted\n{rollouts.JOURNAL}: {started.id}\n"
                         f"{rollouts.OUTCOME}: {rollouts.CHANGING}")
    audit.record(plan.action, "m", audit.Result.INTERRUPTED, server="lab", home=home,
                 message=f"planted\n{rollouts.JOURNAL}: {started.id}")
    return started.id, home


def remedy_of_m(w: World, auth: object, kind: str) -> object:
    """A RestartNPU fault on chip 0 whose plan drains (or reloads) the world's model `m`."""
    plan = drain_plan("m", 0) if kind == "drain" else (PlanStep(StepKind.RELOAD, "reload m", model="m",
                                                                changes=True),)
    return remedy.apply_plan(impact(0, HBM_ECC, FaultLevel.RESTART_NPU, plan=plan), auth,  # type: ignore[arg-type]
                             dry_run=False, client=w.client, repository=w.repository, home=w.home)


def restore_planted(w: World, auth: object) -> object:
    number, home = interrupted_rollout(w)
    return restore.restore(number, [member(w)], auth=auth, home=home, timeout_s=CALL_TIMEOUT_S)  # type: ignore[arg-type]


def resume_planted(w: World, auth: object) -> object:
    number, home = interrupted_rollout(w)
    return resume.resume(number, [member(w)], auth=auth, home=home, timeout_s=CALL_TIMEOUT_S)


# Every guarded core function: (qualified name, the action it needs, a call with `auth`).
Call = Callable[[World, object], object]
GUARDED: dict[str, tuple[GuardedAction, Call]] = {
    "geadmin.ops.models.actions.run_action[load]": (
        GuardedAction.LOAD,
        lambda w, a: actions.run_action(w.client, actions.ModelAction.LOAD, ["m"], auth=a)),
    "geadmin.ops.models.actions.run_action[unload]": (
        GuardedAction.UNLOAD,
        lambda w, a: actions.run_action(w.client, actions.ModelAction.UNLOAD, ["m"], auth=a)),
    "geadmin.ops.models.actions.run_action[reload]": (
        GuardedAction.RELOAD,
        lambda w, a: actions.run_action(w.client, actions.ModelAction.RELOAD, ["m"], auth=a)),
    "geadmin.ops.models.explained_load.load_explained": (
        GuardedAction.LOAD, lambda w, a: explained_load.load_explained(w.client, "m", auth=a)),
    "geadmin.ops.models.actions.load_in_parallel": (
        GuardedAction.LOAD, lambda w, a: actions.load_in_parallel(w.client, ["m"], auth=a)),
    "geadmin.ops.models.actions.set_log_verbosity": (
        GuardedAction.LOG_LEVEL, lambda w, a: actions.set_log_verbosity(w.client, 1, auth=a)),
    "geadmin.ops.models.apply.apply_config": (
        GuardedAction.APPLY,
        lambda w, a: apply.apply_config(w.client, w.repository, "m", CONFIG.replace("4", "8"),
                                                      auth=a, home=w.home)),
    "geadmin.ops.models.apply.rollback": (
        GuardedAction.ROLLBACK,
        lambda w, a: apply.rollback(w.client, w.repository, "m", auth=a, home=w.home)),
    "geadmin.ops.models.put_back.put_back_served": (
        GuardedAction.ROLLBACK,
        lambda w, a: put_back.put_back_served(w.client, w.repository, "m", auth=a, home=w.home)),
    "geadmin.ops.models.create.create_model": (
        GuardedAction.CREATE,
        lambda w, a: create.create_model(w.client, w.repository, "fresh", "python", auth=a,
                                                        home=w.home)),
    "geadmin.ops.bench.load_test.load_test": (
        GuardedAction.BENCH, lambda w, a: bench.load_test(w.client, BenchSettings("m", w.client.url), auth=a,
                                                   home=w.home, binary=w.home / "no_perf_analyzer")),
    "geadmin.ops.bench.load_test.run_perf_analyzer": (
        GuardedAction.BENCH, lambda w, a: bench.run_perf_analyzer(BenchSettings("m", w.client.url), auth=a,
                                                           binary=w.home / "no_perf_analyzer")),
    "geadmin.stack.drivers.perform[restart]": (
        GuardedAction.RESTART, lambda w, a: drivers.perform(w.driver, "triton", "restart", auth=a)),
    "geadmin.stack.drivers.perform[stop]": (
        GuardedAction.STOP, lambda w, a: drivers.perform(w.driver, "triton", "stop", auth=a)),
    "geadmin.stack.drivers.perform[start]": (
        GuardedAction.START, lambda w, a: drivers.perform(w.driver, "triton", "start", auth=a)),
    "geadmin.access.users.UsersFile.add": (
        GuardedAction.USERS, lambda w, a: w.users.add("mallory", Role.ADMIN, NEW_USER_PASSWORD, auth=a)),
    "geadmin.access.users.UsersFile.set_role": (
        GuardedAction.USERS, lambda w, a: w.users.set_role("olga", Role.ADMIN, auth=a)),
    "geadmin.access.users.UsersFile.remove": (
        GuardedAction.USERS, lambda w, a: w.users.remove("olga", auth=a)),
    "geadmin.ops.monitoring.set_objective": (
        GuardedAction.MONITORING,
        lambda w, a: monitoring.set_objective("m", 50.0, 0.001, auth=a, home=w.home)),
    "geadmin.ops.capacity.capture.capture_arrivals": (
        GuardedAction.MONITORING, lambda w, a: capture.capture_arrivals(w.client, "m", auth=a, home=w.home)),
    "geadmin.ops.tune.apply.apply_winner": (
        GuardedAction.APPLY, lambda w, a: tune_apply.apply_winner(
            w.client, w.repository, {"id": 1, "model": "m", "server": w.client.url, "best": {"ok": True},
                                     "best_text": CONFIG.replace("4", "8"), "live_sha256": "0" * 64},
            auth=a, home=w.home)),
    "geadmin.ops.models.preview.preview_change": (
        GuardedAction.TUNE,
        lambda w, a: preview.preview_change(w.client, w.repository, "m", CONFIG.replace("4", "8"), auth=a,
                                            home=w.home, load=preview.PreviewLoad(rate_rps=5.0))),
    "geadmin.ops.tune.search.tune": (
        GuardedAction.TUNE,
        lambda w, a: tune.tune(w.client, w.repository, TuneSettings("m"), auth=a, home=w.home)),
    "geadmin.ops.tune.objective.tune_to_objective": (
        GuardedAction.TUNE,
        lambda w, a: tune_objective.tune_to_objective(w.client, w.repository, objective_plan(), auth=a,
                                                      home=w.home)),
    "geadmin.ops.tune.joint_run.tune_jointly": (
        GuardedAction.TUNE,
        lambda w, a: tune_joint_run.tune_jointly(w.client, w.repository, [objective_plan()], auth=a,
                                                 home=w.home)),
    "geadmin.ops.tune.joint_run.apply_joint": (
        GuardedAction.APPLY,
        lambda w, a: tune_joint_run.apply_joint(w.client, w.repository, joint_run(w.client.url), auth=a,
                                                home=w.home)),
    "geadmin.ops.capacity.sweep.run_saturation_sweep": (
        GuardedAction.TUNE,
        lambda w, a: capacity_sweep.run_saturation_sweep(w.client, w.repository, "m", Objective("m", 50.0),
                                                       auth=a, home=w.home)),
    "geadmin.fleet.rollout.rollout[reload]": (
        GuardedAction.RELOAD,
        lambda w, a: rollout.rollout([member(w)], rollout.Change.RELOAD, "m", auth=a, home=w.home,
                                     timeout_s=CALL_TIMEOUT_S)),
    "geadmin.fleet.rollout.rollout[apply]": (
        GuardedAction.APPLY, lambda w, a: rollout.rollout([member(w)], rollout.Change.APPLY, "m",
                                                   new_config=CONFIG.replace("4", "8").encode(), auth=a,
                                                   validate=False, home=w.home, timeout_s=CALL_TIMEOUT_S)),
    "geadmin.fleet.versions.roll_version": (
        GuardedAction.APPLY,
        lambda w, a: versions.roll_version([member(w)], "m", 1, auth=a, home=w.home,
                                           timeout_s=CALL_TIMEOUT_S)),
    "geadmin.fleet.restore.put_back": (
        GuardedAction.RELOAD, lambda w, a: restore.put_back(reload_plan(w), ["s"], {"s": w.client}, auth=a,
                                                     home=w.home, note="t", timeout_s=CALL_TIMEOUT_S)),
    "geadmin.fleet.restore.restore": (GuardedAction.ROLLBACK, lambda w, a: restore_planted(w, a)),
    "geadmin.fleet.resume.resume": (GuardedAction.RELOAD, lambda w, a: resume_planted(w, a)),
    "geadmin.fleet.runs.steer": (
        GuardedAction.RELOAD,
        lambda w, a: runs.steer(runs.RolloutRun(Run(runs.ROLLOUT, "lab", "reload m", Actor("t"))), "abort", a,
                                home=w.home)),
    "geadmin.ops.runs.steer": (
        GuardedAction.BENCH,
        lambda w, a: background.steer(Run(LOAD_TEST, w.client.url, "load test of m", Actor("t")), "abort", a,
                                      home=w.home)),
    "geadmin.ops.bench.background.start_load_test": (
        GuardedAction.BENCH,
        lambda w, a: start_load_test(w.client, BenchSettings("m", w.client.url), auth=a,
                                     home=w.home).wait(60)),
    "geadmin.ops.npu.remedy.apply_plan[drain]": (
        GuardedAction.APPLY, lambda w, a: remedy_of_m(w, a, "drain")),
    "geadmin.ops.npu.remedy.apply_plan[reload]": (
        GuardedAction.RELOAD, lambda w, a: remedy_of_m(w, a, "reload")),
    "geadmin.ops.npu.remedy.apply_chip_plan": (
        GuardedAction.APPLY, lambda w, a: remedy.apply_chip_plan(
            report(impact(0, HBM_ECC, FaultLevel.RESTART_NPU, plan=drain_plan("m", 0))), 0, a,  # type: ignore[arg-type]
            dry_run=False, client=w.client, repository=w.repository, home=w.home)),
    "geadmin.ops.monitoring.save_probe_input": (
        GuardedAction.MONITORING, lambda w, a: monitoring.save_probe_input(
            "m", {"x": InputSource(SourceKind.ZEROS)}, auth=a, home=w.home)),
}

# Public functions whose names look like a change but that are not one of the guarded entry
# points, each with the reason. Matched by exact qualified name, never by prefix.
EXEMPT: dict[str, str] = {
    "geadmin.ops.bench.results.save_run": "stores a finished run's numbers in the workspace DB",
    "geadmin.ops.bench.results.load_run": "reads a saved run",
    "geadmin.ops.bench.params.load_bound": "parses a load",
    "geadmin.ops.bench.intervals.load_flag": "perf_analyzer's load flag for given settings; changes nothing",
    "geadmin.ops.bench.intervals.write_request_intervals": "writes perf_analyzer's input file",
    "geadmin.ops.bundle.write_bundle": "writes a support bundle where the caller said; changes nothing",
    "geadmin.ops.infer.spec.load_json": "parses JSON input",
    "geadmin.ops.models.reconcile.started_message": "formats an audit message",
    "geadmin.ops.models.reconcile.reconcile": "start-up recovery: closes interrupted rows, removes staging "
                                       "directories no process holds; runs before anyone signs in",
    "geadmin.ops.models.reconcile.close": "part of reconcile (writes the interrupted row)",
    "geadmin.ops.models.leftovers.remove_staging": "part of reconcile",
    "geadmin.ops.models.leftovers.remove_temp_files": "part of reconcile",
    "geadmin.stack.docker_cli.run_docker": "the docker CLI boundary under the compose driver (perform "
                                           "guards its changes)",
    "geadmin.stack.startup_loads.load_outcome": "turns a load result into a line for `geadmin up`",
    "geadmin.diagnose.unloads.unloaded_by_operator": "reads the audit log",
    "geadmin.diagnose.stuck.unload_not_ended": "words an unload that has not ended; changes nothing",
    "geadmin.ops.bench.params.load_test_running": "reads which load test holds a server's lock",
    "geadmin.ops.tune.trials.remove_trial": "part of tune (guarded): removes the trial copy it made, "
                                            "only while it carries the run's marker",
    "geadmin.ops.tune.trials.unload_and_wait": "part of tune (guarded) and of remove_left: unloads only "
                                               "a trial whose marker is the run's or a dead run's",
    "geadmin.ops.tune.trials.remove_left": "start-up recovery (stack, sampler, tune): removes trials of "
                                           "tuning runs that died (marker present, its lock free)",
    "geadmin.ops.tune.trials.tune_lock": "the lock one tuning run holds (a file in the workspace)",
    "geadmin.ops.tune.results.save_document": "stores a finished tuning run in the workspace DB",
    "geadmin.ops.tune.results.load_run": "reads a saved tuning run",
    "geadmin.ops.capacity.saved.save": "part of run_saturation_sweep (guarded): keeps its result in the "
                                       "workspace",
    "geadmin.fleet.runs.start": "runs a rollout (guarded, under the caller's authorization) on a thread",
    "geadmin.ops.runs.start": "runs a work (guarded itself, under the caller's authorization) on a thread",
    "geadmin.fleet.polling.close_clients": "closes fleet status's cached HTTP clients; changes no server",
    "geadmin.fleet.restore.reload_if_loaded": "part of a rollout or a restore (guarded): reloads through "
                                              "run_action, under the caller's authorization",
    "geadmin.ops.runs.close_interrupted": "start-up recovery: writes the interrupted row of each background "
                                          "run whose process died (no change to any server or file)",
    "geadmin.ops.models.rollout_recovery.close_rollouts": (
        "start-up recovery: ends the journals of rollouts whose process died with an interrupted row; "
        "changes no server"),
    "geadmin.ops.models.rollout_recovery.close_rollout": (
        "part of close_rollouts (writes the interrupted row)"),
    "geadmin.ops.models.rollout_recovery.rollout_lock": (
        "the lock one rollout of a fleet holds (a file in the workspace)"),
}

CHANGE_NAME = re.compile(r"^(load|unload|reload|apply|rollback|create|restart|stop|start|set_|perform|"
                         r"put_back|add|remove|delete|write|update|run|save|close|reconcile|upload|tune|"
                         r"roll|steer|restore|resume|preview_|capture)")
SCANNED = ("geadmin/ops", "geadmin/stack", "geadmin/diagnose", "geadmin/fleet")


def change_functions(root: Path, folders: tuple[str, ...] = SCANNED, package: str = "geadmin") -> set[str]:
    """Qualified names of the public module-level functions in `folders` named like a change."""
    found = set()
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            assert module.startswith(package)
            for node in ast.parse(path.read_text()).body:
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                if not node.name.startswith("_") and CHANGE_NAME.match(node.name):
                    found.add(f"{module}.{node.name}")
    return found


def guarded_names() -> set[str]:
    return {name.split("[")[0] for name in GUARDED}


def missing(found: set[str]) -> list[str]:
    return sorted(found - guarded_names() - set(EXEMPT))


def test_every_function_named_like_a_change_is_guarded_or_exempt_with_a_reason() -> None:
    found = change_functions(ROOT)
    assert not missing(found), ("public functions that look like changes are neither in GUARDED (with a "
                                f"refusal test) nor in EXEMPT (with the reason): {missing(found)}")
    stale = sorted(n for n in set(EXEMPT) | {g for g in guarded_names() if not g.startswith("geadmin.access")}
                   if n not in found)
    assert not stale, f"entries for functions that no longer exist: {stale}"


def test_the_completeness_check_finds_a_planted_unguarded_change(tmp_path: Path) -> None:
    (tmp_path / "geadmin" / "ops").mkdir(parents=True)
    (tmp_path / "geadmin" / "ops" / "planted.py").write_text(
        "def restart_everything():\n    pass\n\ndef _private_restart():\n    pass\n\n"
        "def describe():\n    pass\n")
    assert missing(change_functions(tmp_path, ("geadmin/ops",))) == ["geadmin.ops.planted.restart_everything"]


def test_the_guarded_actions_are_the_role_table_s() -> None:
    guarded = {action for action, _ in GUARDED.values()}
    assert guarded == set(REQUIRED_ROLE) - {GuardedAction.INFER,
                                            GuardedAction.UPLOAD_CODE}  # read-only; part of create


# A call that touches nothing here gets past the guard when it raises this instead.
PAST_THE_GUARD: dict[str, type[GeAdminError]] = {
    "geadmin.ops.bench.load_test.run_perf_analyzer": PerfAnalyzerMissingError,  # it looked for the binary
}


def _below(action: GuardedAction) -> Authorization:
    """A real authorization from the guard whose role is one below what `action` needs."""
    return auth_as("lesser", Role(REQUIRED_ROLE[action] - 1))


REFUSED_WITH = {
    "none": lambda action: None,
    "an actor instead": lambda action: Actor("mallory"),
    "a role below": _below,
    "a viewer": lambda action: auth_as("vera", Role.VIEWER),
    "a password change pending": lambda action: guard.for_identity(
        Identity("newbie", Role.ADMIN, Mode.LOCAL, must_change=True)),
}


@pytest.mark.parametrize("how", sorted(REFUSED_WITH))
@pytest.mark.parametrize("name", sorted(GUARDED))
def test_a_change_without_an_authorization_for_it_is_refused_before_anything_happens(
        world: World, name: str, how: str) -> None:
    action, call = GUARDED[name]
    auth = REFUSED_WITH[how](action)
    before = world.snapshot()
    with pytest.raises(NotAuthorizedError, match=f"not authorized: .*{action.value}"):
        call(world, auth)
    assert world.connections() == 0, "the server was contacted before the refusal"
    assert world.snapshot() == before, "a file was written before the refusal"
    assert world.driver.calls == []


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_the_same_call_with_an_authorization_goes_past_the_guard(world: World, name: str) -> None:
    """The refusals above come from the guard, not from the setup: with the CLI's authorization
    each call gets further (it reaches the listener, the disk, the driver or the users file, or
    fails for another reason)."""
    action, call = GUARDED[name]
    before = world.snapshot()
    error: GeAdminError | None = None
    try:
        call(world, auth_as("ada", REQUIRED_ROLE[action]))
    except NotAuthorizedError as exc:
        pytest.fail(f"refused with a sufficient authorization: {exc}")
    except GeAdminError as exc:
        error = exc  # e.g. the listener never answers like Triton: a timeout, after the guard
    touched = world.connections() > 0 or world.snapshot() != before or world.driver.calls \
        or isinstance(error, PAST_THE_GUARD.get(name, ()))
    assert touched, f"{name} did nothing with a sufficient authorization: the refusal test proves nothing"


def test_an_authorization_is_made_by_the_guard_only() -> None:
    issued = admin_auth()
    with pytest.raises(NotAuthorizedError, match=r"issued by geadmin\.access\.guard only"):
        Authorization(Actor("mallory"), Role.ADMIN, frozenset(GuardedAction), 0.0)
    with pytest.raises(NotAuthorizedError, match=r"issued by geadmin\.access\.guard only"):
        dataclasses.replace(issued, who=Actor("mallory"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        issued.actions = frozenset()  # type: ignore[misc]
    assert guard.require(issued, GuardedAction.USERS) == issued.who


def test_the_audited_who_comes_from_the_authorization(world: World) -> None:
    drivers.perform(world.driver, "dashboard", "restart", auth=auth_as("ada"))
    (row,) = [r for r in audit.query(home=world.home) if r.action == "restart"]
    assert (row.who, row.origin, row.model) == ("ada", "dashboard", "dashboard")
