"""Joint tuning against a real tritonserver serving two npu_ge models on the ACL double's
device 0 (2 GiB of weights an instance each; the device has 32 GiB, 2 reserved): the
model <-> NPU map names both for device 0, each model's objective search runs on its trial copy
at its recorded peak, the room on device 0 is what was free before the run plus what the two
live models hold, the joint choice fits with each pick's measured memory, and the apply goes
one model at a time: the first applied, the second refused because its file changed after its
run started, and the audit row says which."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.access import guard
from geadmin.audit import Result
from geadmin.errors import InvalidArgumentError
from geadmin.ops.tune.joint_run import apply_joint, live_hold, models_on_npu, placement, tune_jointly
from geadmin.ops.tune.memory import device_hbm
from geadmin.ops.tune.objective import objective_plan
from geadmin.telemetry.alerting.objectives import Objective, store
from geadmin.telemetry.history.reader import WorkspaceHistory
from geadmin.triton.client import TritonClient
from tests.support.npu_ge import StartServer, affine_model
from tests.support.recorded import record_rates

GIB, MIB = 1 << 30, 1 << 20
MODELS = ("left", "right")


def settled_hbm(metrics_url: str, timeout_s: float = 15.0) -> tuple[int, int]:
    """Device 0's (used, total) once npu_ge's device metrics (refreshed on its own interval)
    give the same used HBM, to the MiB, twice a second apart: the models have finished loading."""
    deadline = time.monotonic() + timeout_s
    last = device_hbm(metrics_url).get(0, (0, 0))
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = device_hbm(metrics_url).get(0, (0, 0))
        if now[1] and abs(now[0] - last[0]) < MIB:
            return now
        last = now
    raise AssertionError(f"device 0's HBM did not settle: {last}")


def test_models_on_one_npu_are_tuned_together_and_applied_one_at_a_time(
        npu_triton: StartServer, npu_repo: Path, tmp_path: Path) -> None:
    for name in MODELS:
        affine_model(npu_repo, name, max_batch=1, gears="1,2,4", width=8, batching="", device_ids="0",
                     extra=["delay_us 2000", f"weight_bytes {2 * GIB}"])
    server = npu_triton(npu_repo, models=list(MODELS))
    home = tmp_path / "home"
    home.mkdir()
    since = time.time() - 600
    for name in MODELS:
        store(Objective(name, p99_ms=500.0, error_budget=0.01), "test", home=home)
        record_rates(home, server.metrics_url, name, [30.0, 40.0, 35.0], start_s=since)
    auth = guard.os_user()
    with TritonClient(server.url) as client:
        models = models_on_npu(placement(client, server.metrics_url), 0)
        assert models == MODELS
        history = WorkspaceHistory(home)
        plans = [objective_plan(name, history=history, since=audit.parse_since("1h"), home=home,
                                source=server.metrics_url, max_instances=1, window_ms=500) for name in models]
        used, total = settled_hbm(server.metrics_url)  # what the run reads before any trial loads
        joint = tune_jointly(client, npu_repo, plans, auth=auth, home=home, budget_s=60.0,
                             metrics_url=server.metrics_url)
        assert joint.devices == {"left": (0,), "right": (0,)}
        # free before the run, plus the 2 GiB each of the two live models hold
        assert list(joint.room) == [0] and abs(joint.room[0] - (total - used + 2 * 2 * GIB)) < MIB, \
            (joint.room, used, total, [(r.model, live_hold(r), [t.memory_bytes for t in r.trials])
                                       for r in joint.results])
        assert joint.choice.fits, joint.choice.describe()
        assert [p.model for p in joint.choice.picks] == list(MODELS)
        assert all(abs(p.memory_bytes - 2 * GIB) < MIB for p in joint.choice.picks), joint.choice.describe()
        assert all(r.id is not None for r in joint.results)
        assert not [m.name for m in client.repository_index() if "__tune_" in m.name]  # trial copies gone

        right = npu_repo / "right" / "config.pbtxt"
        right.write_text(right.read_text() + "# edited after the run started\n")
        done = apply_joint(client, npu_repo, joint, auth=auth, home=home)
        assert done.applied == ("left",) and done.failed == "right" and not done.ok
        assert "changed since tuning run" in done.reason, done.reason
        chosen = joint.choice.picks[0].trial.candidate
        assert client.model_config("left").max_batch_size == chosen.max_batch_size
    assert right.read_text().endswith("# edited after the run started\n")  # never overwritten
    row = next(r for r in audit.query(home=home) if r.model == "left+right")
    assert row.action == "tune" and row.result == Result.FAILED
    assert "applied: left; right failed: " in row.message and "not tried: none" in row.message


def test_a_device_the_map_places_no_model_on_is_refused(npu_triton: StartServer, npu_repo: Path) -> None:
    affine_model(npu_repo, "left", max_batch=1, gears="1", width=8, batching="", device_ids="0")
    server = npu_triton(npu_repo, models=["left"])
    with TritonClient(server.url) as client:
        found = placement(client, server.metrics_url)
        assert found.models_on(0) == ("left",)
        with pytest.raises(InvalidArgumentError, match="places no model on device 7"):
            models_on_npu(found, 7)
