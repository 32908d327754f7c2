"""The joint choice of models that share an NPU (geadmin.ops.tune.joint): one trial meeting its
objective per model, their memory summed on each shared device within its room; fewest instances,
then least memory; the closest combination and the short device when nothing fits; a model
with no meeting trial; the bound on the combinations. Plus the joint run's pieces on values
(geadmin.ops.tune.joint_run): the options, the live models' hold, the apply's refusal, the
CLI's refusals; and the load-test lock a tuning run shares with load tests, both ways."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.errors import BenchBusyError, TuneBusyError, TuneRefusedError
from geadmin.ops.bench.params import load_test_running, server_lock
from geadmin.ops.tune.joint import MAX_COMBINATIONS, JointChoice, choose
from geadmin.ops.tune.joint_run import JointRun, apply_joint, live_hold, options
from geadmin.ops.tune.objective import ObjectivePlan
from geadmin.ops.tune.outcome import Trial, TuneResult, TuneSettings
from geadmin.ops.tune.search import measuring_alone
from geadmin.ops.tune.space import Candidate
from geadmin.telemetry.alerting.objectives import Objective
from geadmin.telemetry.history.traffic import RecordedLoad
from tests.support.auth import admin_auth

MIB = 1 << 20
SERVER = "http://127.0.0.1:8000"
OBJECTIVE = Objective("m", p99_ms=50.0, error_budget=0.01)
RATE = 20.0


def trial(instances: int, p99_ms: float, *, memory: int | None = None, batch: int = 0,
          rate: float = RATE) -> Trial:
    return Trial(Candidate(batch, 0, instances), "objective", True, RATE, p99_ms / 2, p99_ms, rate_rps=rate,
                 requests=200, memory_bytes=memory)


def mib(n: int) -> int:
    return n * MIB


def option(instances: int, memory_mib: int, *, batch: int = 4, p99_ms: float = 20.0) -> Trial:
    return trial(instances, p99_ms, memory=mib(memory_mib), batch=batch)


def test_the_choice_fits_the_shared_device_where_each_model_s_best_would_not() -> None:
    # Each model alone would take its smallest option (1 instance); together they need 7000 MiB
    # on device 0, which has 6000: the joint choice gives b the option that leaves room.
    a = [option(1, 4000, batch=16), option(1, 3500, batch=8)]
    b = [option(1, 3000, batch=16), option(1, 2500, batch=4), option(2, 1000, batch=1)]
    found = choose({"a": a, "b": b}, {"a": (0,), "b": (0,)}, {0: mib(6000)})
    assert found.fits and not found.cut
    assert [(p.model, p.memory_bytes) for p in found.picks] == [("a", mib(3500)), ("b", mib(2500))]
    assert found.describe().startswith("joint choice: a: ")
    assert "2 instances, 6000 MiB in total" in found.describe()


def test_fewest_instances_come_before_least_memory() -> None:
    a = [option(2, 500), option(1, 2000)]
    found = choose({"a": a, "b": [option(1, 1000)]}, {"a": (0,), "b": (0,)}, {0: mib(10_000)})
    assert [p.trial.candidate.instances for p in found.picks] == [1, 1]
    assert found.picks[0].memory_bytes == mib(2000)


def test_ties_go_to_the_least_memory_then_the_smaller_batch_then_the_lower_p99() -> None:
    room = {0: mib(10_000)}
    same = [option(1, 1000, batch=16), option(1, 1000, batch=8, p99_ms=30.0),
            option(1, 1000, batch=8, p99_ms=10.0)]
    found = choose({"a": same}, {"a": (0,)}, room)
    assert found.picks[0].trial.candidate.max_batch_size == 8 and found.picks[0].trial.p99_ms == 10.0
    less = choose({"a": [option(1, 1200, batch=1), option(1, 1000, batch=64)]}, {"a": (0,)}, room)
    assert less.picks[0].memory_bytes == mib(1000)


def test_models_on_different_devices_do_not_share_room() -> None:
    found = choose({"a": [option(1, 5000)], "b": [option(1, 5000)]}, {"a": (0,), "b": (1,)},
                   {0: mib(6000), 1: mib(6000)})
    assert found.fits


def test_when_nothing_fits_the_short_device_and_the_closest_combination_are_named() -> None:
    a = [option(1, 4000), option(1, 3800)]
    b = [option(1, 3000), option(2, 2600)]
    found = choose({"a": a, "b": b}, {"a": (0,), "b": (0, 1)}, {0: mib(6000), 1: mib(30_000)})
    assert not found.fits
    assert [(p.model, p.memory_bytes) for p in found.picks] == [("a", mib(3800)), ("b", mib(2600))]
    assert [(s.device, s.need_bytes - s.room_bytes) for s in found.shortages] == [(0, mib(400))]
    assert found.describe() == (
        "no combination fits: device 0 is short by 400 MiB: a 3800 MiB + b 2600 MiB = 6400 MiB, and 6000 MiB "
        "is there (free before the run + what the live models hold); the closest: a: "
        f"{a[1].candidate.describe()} (3800 MiB); b: {b[1].candidate.describe()} (2600 MiB)")


def test_a_model_with_no_trial_meeting_its_objective_means_no_choice_and_is_named() -> None:
    found = choose({"a": [option(1, 100)], "b": []}, {"a": (0,), "b": (0,)}, {0: mib(6000)})
    assert not found.fits and found.picks == () and found.missing == ("b",)
    assert found.describe().startswith("no joint choice: b met its objective in no trial")


def test_the_search_is_bounded_and_says_it_was_cut() -> None:
    many = {name: [option(1, 100 + i) for i in range(10)] for name in ("a", "b", "c", "d")}  # 10^4
    found = choose(many, {m: (0,) for m in many}, {0: mib(100_000)})
    assert found.total == 10_000 and found.examined == MAX_COMBINATIONS and found.cut
    assert found.fits and all(p.memory_bytes == mib(100) for p in found.picks)  # best options first
    assert f"cut: {MAX_COMBINATIONS} of 10000 combinations examined" in found.describe()
    small = choose(many, {m: (0,) for m in many}, {0: mib(100_000)}, limit=3)
    assert small.examined == 3 and small.cut


def test_a_device_whose_memory_is_unknown_is_not_checked_and_said() -> None:
    found = choose({"a": [option(1, 9000)]}, {"a": (5,)}, {})
    assert found.fits and found.unchecked == (5,)
    assert "HBM unknown on device(s) 5: not checked there" in found.describe()
    unmeasured = choose({"a": [trial(1, 20.0)]}, {"a": (0,)}, {0: mib(10)})
    assert unmeasured.fits and "NPU memory not measured for a: counted as 0" in unmeasured.describe()


def result(model: str, trials: tuple[Trial, ...], live_instances: int = 1) -> TuneResult:
    return TuneResult(model, SERVER, TuneSettings(model), Candidate(4, 0, live_instances), trials, None, "",
                      id=1)


def test_the_options_are_the_trials_meeting_the_objective_at_the_plan_s_rate() -> None:
    now = datetime.now(timezone.utc)
    load = RecordedLoad("m", now - timedelta(hours=1), now, RATE / 2, RATE, samples=3)
    plan = ObjectivePlan(OBJECTIVE, load)
    meets, slow, elsewhere = trial(1, 20.0), trial(1, 90.0), trial(1, 20.0, rate=RATE * 2)
    assert options(result("m", (meets, slow, elsewhere)), plan) == [meets]
    assert live_hold(result("m", (trial(2, 20.0, memory=mib(3000)),), live_instances=3)) == mib(4500)
    assert live_hold(result("m", (trial(2, 20.0),))) == 0  # not measured: nothing counted


def test_a_joint_choice_that_does_not_fit_is_never_applied(tmp_path: Path) -> None:
    found = JointChoice((), False, missing=("b",))
    joint = JointRun((), (), {}, {}, found)
    with pytest.raises(TuneRefusedError, match="nothing applied: no joint choice: b met its objective"):
        apply_joint(None, tmp_path, joint, auth=admin_auth(), home=tmp_path)  # type: ignore[arg-type]


def test_the_cli_refuses_joint_tuning_without_objective(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path))
    argv = ["tune", "a", "b", "--url", "http://127.0.0.1:9", "--repository", str(tmp_path)]
    assert main(argv) == ExitCode.USAGE
    assert "tuned together with --objective" in capsys.readouterr().err
    assert main(["tune", "a", "--objective", "--metrics-url", "ftp://x", "--url", "http://127.0.0.1:9",
                 "--repository", str(tmp_path)]) == ExitCode.USAGE
    assert "--metrics-url" in capsys.readouterr().err
    assert main(["tune", "a", "--objective", "--apply", "--url", "http://127.0.0.1:9"]) == ExitCode.USAGE
    assert "geadmin tune MODEL --apply-run ID" in capsys.readouterr().err


def test_a_tuning_run_is_refused_while_a_load_test_holds_the_server(tmp_path: Path) -> None:
    refused = r"cannot tune m now: another load test runs against .*resnet, pid"
    with server_lock(tmp_path, SERVER, "resnet"), pytest.raises(TuneBusyError, match=refused), \
            measuring_alone(tmp_path, SERVER, "m"):
        pass
    with measuring_alone(tmp_path, SERVER, "m"):  # released: free again
        pass


def test_a_capacity_sweep_is_refused_while_a_load_test_holds_the_server(tmp_path: Path) -> None:
    """The sweep measures with perf_analyzer too: it takes the same lock, before touching the repository."""
    from types import SimpleNamespace

    from geadmin.ops.capacity.sweep import run_saturation_sweep

    refused = r"cannot measure the capacity of m now: another load test runs against .*resnet, pid"
    client = SimpleNamespace(url=SERVER)
    with server_lock(tmp_path, SERVER, "resnet"), pytest.raises(TuneBusyError, match=refused):
        run_saturation_sweep(client, tmp_path / "no-repository", "m",  # type: ignore[arg-type]
                             Objective("m", p99_ms=50.0), auth=admin_auth(), home=tmp_path)


def test_a_load_test_is_refused_while_a_tuning_run_holds_the_server(tmp_path: Path) -> None:
    with measuring_alone(tmp_path, SERVER, "m"):
        refused = r"a tuning run measures .* now \(m \(tuning run\), pid"
        with pytest.raises(BenchBusyError, match=refused), server_lock(tmp_path, SERVER, "other"):
            pass
        running = load_test_running(tmp_path, SERVER)
        assert running is not None and running.model == "m"  # probes skip the tuned model's server load too
    with server_lock(tmp_path, SERVER, "other"):
        pass

