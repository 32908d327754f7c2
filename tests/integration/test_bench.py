"""Load tests for real: the tritonclient wheel's perf_analyzer against a real tritonserver
with the sample models, short measurement windows so the module stays well under a minute."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.cli.main import main
from geadmin.errors import (
    ModelNotFoundError,
    PerfAnalyzerTimeoutError,
    SharedMemoryUnreachableError,
    TritonUnreachableError,
)
from geadmin.ops.bench import invocation
from geadmin.ops.bench.load_test import BenchSettings, load_test, run_perf_analyzer
from geadmin.ops.bench.params import NO_STABILITY_GATE
from geadmin.ops.bench.results import CONCURRENCY, REQUEST_RATE, compare, list_runs, load_run
from geadmin.ops.infer.inputs import InputSource, SourceKind
from geadmin.stack.processes import free_port
from geadmin.stack.triton_install import find_tritonserver
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import SAMPLE_REPOSITORY
from geadmin.triton.client import TritonClient
from tests.support.auth import admin_auth, auth_as
from tests.support.perf_analyzer_double import UNSTABLE_OUTPUT, perf_analyzer_double
from tests.support.processes import cmdline, descendants, quick_stopping_triton, wait_for
from tests.support.samples import add_hung_model

WINDOW_MS = 500  # perf_analyzer's measurement window: short, these are behaviour checks
OWN_DEV_SHM = Path(__file__).parent / "assets" / "tritonserver_own_dev_shm.sh"


def quick(model: str, url: str, loads: tuple[float, ...], mode: str = CONCURRENCY) -> BenchSettings:
    """No stability gate: these check what a run measures and keeps, and a 50 % gate still failed
    beside two other workers (a stall between 500 ms windows)."""
    return BenchSettings(model, url, mode, loads, measurement_interval_ms=WINDOW_MS, max_trials=6,
                         stability_percentage=NO_STABILITY_GATE)


def test_a_load_test_measures_every_concurrency_reports_progress_and_is_saved(
    triton_server: TritonProcess, tmp_path: Path
) -> None:
    seen: list[tuple[int, int]] = []
    with TritonClient(triton_server.http_url) as client:
        run = load_test(client, quick("digits_classifier", triton_server.http_url, (1, 2)),
                        progress=lambda done, total, text: seen.append((done, total)),
                        auth=auth_as("ann"), label="baseline", home=tmp_path)
    assert [p.load for p in run.points] == [1.0, 2.0]
    for point in run.points:
        assert point.throughput_per_s > 0
        assert point.p99_ms >= point.p90_ms >= point.p50_ms > 0
        assert point.queue_ms > 0 and point.compute_infer_ms > 0  # the server's side is there
    assert seen[0] == (0, 2) and seen[-1] == (2, 2)
    assert (1, 2) in seen  # the second point was announced while perf_analyzer ran
    saved = list_runs(tmp_path)
    assert [r.id for r in saved] == [run.id] and saved[0].label == "baseline" and saved[0].who == "ann"
    assert saved[0].points == run.points
    (row,) = audit.query(action="load_test", home=tmp_path)  # audited: who, model, server, loads
    assert (row.who, row.model, row.result) == ("ann", "digits_classifier", "ok")
    assert row.server == triton_server.http_url
    assert "(concurrency 1, 2)" in row.message and f"run #{run.id}" in row.message


def test_request_rates_over_grpc_with_bytes_input(triton_server: TritonProcess, tmp_path: Path) -> None:
    url = f"grpc://{triton_server.grpc_url}"
    with TritonClient(url) as client:
        run = load_test(client, quick("text_normalize", url, (20, 40), REQUEST_RATE),
                        {"TEXT": InputSource(SourceKind.TEXT, "Ｈｅｌｌｏ  World")}, home=tmp_path,
                        auth=admin_auth())
    assert run.mode == REQUEST_RATE and [p.load for p in run.points] == [20.0, 40.0]
    assert all(p.throughput_per_s > 0 for p in run.points)
    assert load_run(run.id or 0, tmp_path).settings == run.settings


def test_nothing_listening_is_unreachable_through_perf_analyzer() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(TritonUnreachableError, match=r"no Triton answers at 127\.0\.0\.1:\d+ over http "
                       r"\(error: failed to get model metadata: HTTP client failed: Couldn't connect"):
        run_perf_analyzer(quick("digits_classifier", url, (1,)), auth=admin_auth())


def test_an_unknown_model_says_load_it_first(triton_server: TritonProcess) -> None:
    with pytest.raises(ModelNotFoundError, match=r"has no model no_such_model loaded .*geadmin models load"):
        run_perf_analyzer(quick("no_such_model", triton_server.http_url, (1,)), auth=admin_auth())


def test_the_cli_runs_lists_and_fails_with_one_line(triton_server: TritonProcess, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "digits_classifier", "--url", triton_server.http_url, "--concurrency", "2",
                 "--measurement-interval", str(WINDOW_MS), "--stability-percentage", "1000000",
                 "--input", "features=zeros", "--batch-size", "2", "--label", "cli",
                 "--home", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    record = json.loads(out)
    assert record["label"] == "cli" and record["settings"]["inputs"] == {"features": "zeros"}
    assert record["points"][0]["throughput_per_s"] > 0 and record["settings"]["batch_size"] == 2
    assert "[1/1] measured 1 of 1 points" in err
    assert main(["bench", "--list", "--home", str(tmp_path)]) == 0
    assert re.search(rf"^\s*{record['id']}\s.*digits_classifier\s+cli\s", capsys.readouterr().out, re.M)
    assert main(["bench", "nowhere_model", "--url", triton_server.http_url, "--home", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere_model" in err


def test_a_sweep_cut_short_keeps_its_points_says_why_and_fails(triton_server: TritonProcess, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """perf_analyzer (a double replaying its recorded words) measured concurrency 1 and gave up
    on 2: the run keeps the one point, saved and listed as cut short, audited as failed, and
    the command exits 1 with perf_analyzer's reason and the next step."""
    (tmp_path / "double").mkdir()
    double = perf_analyzer_double(tmp_path / "double", UNSTABLE_OUTPUT.read_text(), report_rows=1)
    code = main(["bench", "digits_classifier", "--url", triton_server.http_url, "--concurrency", "1,2",
                 "--perf-analyzer", str(double), "--home", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "cut short after 1 point(s): load test of digits_classifier: no stable measurement " \
           "(concurrency 2 not measured, 1 of 2 loads were: Failed to obtain stable" in out
    assert err.splitlines()[-1].startswith("geadmin: error: cut short: load test of digits_classifier: no "
                                           "stable measurement")  # after the progress lines
    assert "raise the measurement interval" in err.splitlines()[-1]
    (run,) = list_runs(tmp_path)
    assert [p.load for p in run.points] == [1.0]
    assert run.cut_short.startswith("load test of digits_classifier: no stable measurement")
    assert main(["bench", "--list", "--home", str(tmp_path)]) == 0
    assert re.search(rf"^\s*{run.id}\s.*\s1 \(cut short\)\s", capsys.readouterr().out, re.M)
    (row,) = audit.query(action="load_test", home=tmp_path)
    assert row.result == "failed" and f"cut short after 1 point(s), kept as run #{run.id}" in row.message


def test_the_cli_sends_tensors_in_shared_memory_and_keeps_it_with_the_run(
        triton_server: TritonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "digits_classifier", "--url", f"grpc://{triton_server.grpc_url}",
                 "--concurrency", "1", "--measurement-interval", str(WINDOW_MS),
                 "--stability-percentage", "1000000", "--shared-memory", "system", "--home", str(tmp_path),
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    record = json.loads(out)
    assert record["settings"]["shared_memory"] == "system" and record["points"][0]["throughput_per_s"] > 0


def test_shared_memory_with_a_triton_that_has_its_own_dev_shm_says_so_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton in a mount namespace of its own, as in another container: without shared
    memory the load test runs; with it, the one-line cause and the fix."""
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLE_REPOSITORY / "digits_classifier", repo / "digits_classifier",
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("REAL_TRITONSERVER", str(find_tritonserver()))
    assert os.geteuid() == 0, "this test starts tritonserver with `unshare --mount`, which needs root"
    with quick_stopping_triton(repo, binary=OWN_DEV_SHM, models=["digits_classifier"],
                       log_path=tmp_path / "triton.log") as server:
        url = f"grpc://{server.grpc_url}"
        measured = run_perf_analyzer(quick("digits_classifier", url, (1.0,)), auth=admin_auth())
        assert measured.points[0].throughput_per_s > 0
        with pytest.raises(SharedMemoryUnreachableError) as caught:
            run_perf_analyzer(replace(quick("digits_classifier", url, (1.0,)), shared_memory="system"),
                              auth=admin_auth())
    message = str(caught.value)
    assert "\n" not in message and "cannot open perf_analyzer's shared memory" in message
    assert message.endswith("turn shared memory off (`--shared-memory none`; on the Load test page, "
                            "Tensors: on the wire)")


def batching_repository(root: Path) -> Path:
    """digits_classifier twice: with the sample's dynamic batching, and without it."""
    source = SAMPLE_REPOSITORY / "digits_classifier"
    for name in ("digits_batching_on", "digits_batching_off"):
        target = root / name
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        config = (source / "config.pbtxt").read_text().replace('"digits_classifier"', f'"{name}"')
        if name.endswith("off"):
            config = re.sub(r"dynamic_batching \{.*?\}\n", "", config, flags=re.S)
            assert "dynamic_batching" not in config
        (target / "config.pbtxt").write_text(config)
    return root


def test_dynamic_batching_on_and_off_compare_per_concurrency(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = triton_factory(batching_repository(tmp_path / "repo"))
    runs = {}
    with TritonClient(server.http_url) as client:
        for state in ("on", "off"):
            runs[state] = load_test(client, quick(f"digits_batching_{state}", server.http_url, (4,)),
                                    label=f"dynamic batching {state}", home=tmp_path, auth=admin_auth())
    result = compare(runs["on"], runs["off"])
    assert [r.load for r in result.rows] == [4.0]
    assert result.rows[0].throughput_ratio > 0 and result.rows[0].p99_ratio > 0
    assert result.headline().endswith(")") and "at concurrency 4" in result.headline()
    assert main(["bench", "--compare", str(runs["on"].id), str(runs["off"].id), "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "dynamic batching on" in out and "dynamic batching off" in out and "A has " in out


def running(pid: int) -> bool:
    """`pid` exists and is not a zombie nobody reaped yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_geadmin_takes_its_perf_analyzer_with_it(triton_server: TritonProcess,
                                                        tmp_path: Path) -> None:
    """perf_analyzer runs in a session of its own (so a cancel stops its whole group): without
    the kernel's parent-death signal a SIGKILLed dashboard or CLI left it loading the server, for
    up to its run timeout, while the freed load-test lock let the next test measure beside it."""
    bench = subprocess.Popen(
        [sys.executable, "-m", "geadmin.cli", "bench", "digits_classifier", "--url", triton_server.http_url,
         "--concurrency", "1,2,4", "--measurement-interval", "5000", "--home", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    analyzers: list[int] = []
    try:
        assert wait_for(lambda: bool(perf_analyzers_below(bench.pid)), 60), "perf_analyzer never started"
        analyzers = perf_analyzers_below(bench.pid)
        bench.kill()
        bench.wait(30)
        assert wait_for(lambda: not any(running(pid) for pid in analyzers), 10), \
            f"perf_analyzer {analyzers} outlived its geadmin"
    finally:
        bench.kill()
        bench.wait(30)
        for pid in analyzers:  # when the test fails: not left loading the shared server
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def perf_analyzers_below(pid: int) -> list[int]:
    return [child for child in descendants(pid) if b"perf_analyzer" in cmdline(child).split(b"\0")[0]]


def test_a_load_test_of_a_hung_model_stops_when_it_finishes_no_request(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model answers its metadata but its execute never returns: perf_analyzer would wait
    until the run's deadline (minutes). Triton's statistics stand still, so the run stops at
    the stall time and says why; the audit has the failed run."""
    monkeypatch.setattr(invocation, "STALL_MIN_S", 4.0)
    server = triton_factory(models=[])
    add_hung_model(server.repository, "hangs_in_execute")
    with TritonClient(server.http_url) as client:
        client.load("hangs_in_execute")
        settings = quick("hangs_in_execute", server.http_url, (1,))
        assert settings.deadline_s > 40  # what it would have waited
        with pytest.raises(PerfAnalyzerTimeoutError, match=r"^load test of hangs_in_execute: the model "
                           r"finished none of perf_analyzer's requests in 4s, so perf_analyzer was stopped"):
            load_test(client, settings, auth=admin_auth(), home=tmp_path)
    assert not [pid for pid in descendants(os.getpid()) if b"perf_analyzer" in cmdline(pid)]
    (row,) = audit.query(model="hangs_in_execute", action="load_test", home=tmp_path)
    assert row.result == "failed" and "finished none of perf_analyzer's requests" in row.message
    server.stop(timeout_s=2)  # the hung requests keep Triton from exiting: SIGKILL after 2 s
