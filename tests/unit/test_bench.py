"""Load tests without a server: perf_analyzer's real CSV reports and failure outputs
(recorded from perf_analyzer 2.51 in assets/perf_analyzer/), the failure table, the
`--input-data` JSON, the real binary stopped at a deadline or on cancel, and runs kept in
and compared from the workspace SQLite."""

from __future__ import annotations

import base64
import builtins
import inspect
import math
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from geadmin import db
from geadmin.cli.bench import parse_sources, render_comparison, render_run
from geadmin.diagnose.capacity import SweepStep
from geadmin.errors import (
    BenchCancelledError,
    BenchSettingsError,
    GeAdminError,
    InferInputError,
    PerfAnalyzerError,
    PerfAnalyzerMissingError,
    PerfAnalyzerTimeoutError,
    TritonUnreachableError,
    UnstableMeasurementError,
)
from geadmin.ops.bench import failures as bench_failures
from geadmin.ops.bench import invocation
from geadmin.ops.bench.failures import (
    EXCEPTION_FAILURES,
    FAILURES,
    OUTPUT_FAILURES,
    BenchFailure,
    classify,
)
from geadmin.ops.bench.invocation import STOP_GRACE_S, point_started, read_report
from geadmin.ops.bench.load_test import (
    BenchSettings,
    find_perf_analyzer,
    parse_loads,
    perf_argv,
    perf_input_data,
    plan_invocations,
    run_perf_analyzer,
)
from geadmin.ops.bench.params import judged_sender_threads
from geadmin.ops.bench.results import (
    CONCURRENCY,
    REQUEST_RATE,
    BenchPoint,
    BenchRun,
    compare,
    list_runs,
    load_run,
    parse_csv,
    save_run,
)
from geadmin.ops.infer.inputs import InputSource, SourceKind
from geadmin.ops.infer.request import build_request
from geadmin.ops.infer.snippets import wire_bytes
from geadmin.ops.infer.spec import InputSpec, ModelSpec, OutputSpec
from geadmin.triton.client import Tensor
from tests.support.auth import admin_auth
from tests.support.perf_analyzer_double import perf_analyzer_double

ASSETS = Path(__file__).parent / "assets" / "perf_analyzer"
ERRORS = sorted((ASSETS / "errors").glob("*.txt"))
SETTINGS = BenchSettings("digits_classifier", "http://127.0.0.1:8000", loads=(1, 2))


def asset(name: str) -> str:
    return (ASSETS / name).read_text()


# -- the CSV report ------------------------------------------------------------------------
def test_a_concurrency_report_gives_every_figure_in_milliseconds() -> None:
    mode, points = parse_csv(asset("concurrency_http.csv"))
    assert mode == CONCURRENCY
    assert [p.load for p in points] == [1.0, 2.0]
    first = points[0]
    assert first.throughput_per_s == pytest.approx(673.435)
    assert (first.p50_ms, first.p90_ms, first.p95_ms, first.p99_ms, first.avg_ms) == pytest.approx(
        (1.447, 1.516, 1.551, 1.761, 1.481))
    assert (first.client_send_ms, first.client_recv_ms, first.network_ms) == pytest.approx((0.047, 0.0, 0.1))
    assert (first.queue_ms, first.compute_input_ms, first.compute_infer_ms, first.compute_output_ms) == \
        pytest.approx((1.097, 0.012, 0.155, 0.069))
    assert first.compute_ms == pytest.approx(0.236)
    assert points[1].p99_ms >= points[1].p50_ms


def test_a_request_rate_report_is_read_as_rates() -> None:
    mode, points = parse_csv(asset("request_rate_grpc.csv"))
    assert mode == REQUEST_RATE
    assert [p.load for p in points] == [50.0, 100.0]
    assert points[1].throughput_per_s == pytest.approx(100.213)


def test_a_report_without_verbose_columns_says_to_write_it_verbose() -> None:
    with pytest.raises(PerfAnalyzerError, match=r"lacks the columns Avg latency.*--verbose-csv"):
        parse_csv(asset("not_verbose.csv"))


def test_a_report_with_a_non_number_names_its_line() -> None:
    text = asset("concurrency_http.csv").replace("1314.88", "n/a")
    with pytest.raises(PerfAnalyzerError, match="line 3: not a number"):
        parse_csv(text)


@pytest.mark.parametrize(("name", "loads"), [("concurrency_http.stdout.txt", [1.0, 2.0]),
                                             ("request_rate_grpc.stdout.txt", [50.0, 100.0])])
def test_progress_reads_the_points_perf_analyzer_announces(name: str, loads: list[float]) -> None:
    announced = [point_started(line) for line in asset(name).splitlines()]
    assert [load for load in announced if load is not None] == loads


def test_requests_sent_late_are_read_for_the_point_they_were_late_at(tmp_path: Path) -> None:
    """Recorded from perf_analyzer 2.51 at 100 and 6,000 req/s on four sync threads: it kept up
    with the first rate and sent 99.97 % of the second's requests late."""
    report = tmp_path / "r.csv"
    report.write_text(asset("request_rate_sent_late.csv"))
    settings = BenchSettings("text_normalize", "http://127.0.0.1:8000", REQUEST_RATE, (100, 6000))
    points = read_report(settings, report, (100.0, 6000.0), asset("request_rate_sent_late.stdout.txt")).points
    assert [(p.load, p.sent_late_pct) for p in points] == [(100.0, 0.0), (6000.0, pytest.approx(99.97))]
    on_time = read_report(settings, report, (100.0, 6000.0), asset("request_rate_grpc.stdout.txt")).points
    assert [p.sent_late_pct for p in on_time] == [0.0, 0.0]


def test_a_replay_s_one_point_takes_the_late_share_its_output_names(tmp_path: Path) -> None:
    """A --request-intervals run prints no "Request Rate: N" line before its point."""
    report = tmp_path / "r.csv"
    report.write_text(asset("intervals_sent_late.csv"))
    settings = BenchSettings("text_normalize", "http://127.0.0.1:8000", REQUEST_RATE, (6666,),
                             request_intervals=tmp_path / "intervals.txt")
    (point,) = read_report(settings, report, (6666.0,), asset("intervals_sent_late.stdout.txt")).points
    assert point.sent_late_pct == pytest.approx(99.97)


@pytest.mark.parametrize(("rate_rps", "p99_ms", "threads"), [
    (30.0, 300.0, 18),  # 9 requests in flight at the objective, twice that
    (1.0, 100.0, 4),  # never fewer than perf_analyzer's own default
    (50.0, None, 100),  # no objective: room for requests of 1 s
    (10_000.0, 500.0, 256),  # never more than the cap
])
def test_a_judged_rate_gets_threads_for_the_requests_its_objective_lets_be_in_flight(
        rate_rps: float, p99_ms: float | None, threads: int) -> None:
    assert judged_sender_threads(rate_rps, p99_ms) == threads


def test_the_sender_threads_are_passed_and_bounded(tmp_path: Path) -> None:
    settings = BenchSettings("m", "http://127.0.0.1:8000", REQUEST_RATE, (30,), max_threads=18)
    argv = perf_argv(settings, Path("pa"), (30,), input_path=None, csv_path=tmp_path / "r.csv", batch_size=1)
    assert argv[argv.index("--max-threads") + 1] == "18"
    default = perf_argv(BenchSettings("m", "http://127.0.0.1:8000", REQUEST_RATE, (30,)), Path("pa"), (30,),
                        input_path=None, csv_path=tmp_path / "r.csv", batch_size=1)
    assert "--max-threads" not in default
    with pytest.raises(BenchSettingsError, match="perf_analyzer's threads must be from 1 to 256, got 257"):
        BenchSettings("m", "http://127.0.0.1:8000", REQUEST_RATE, (30,), max_threads=257)


# -- the failure table ---------------------------------------------------------------------
# Every BenchFailure and the test that reaches it through the real code path.
FAILURE_CASES = {
    BenchFailure.BINARY_MISSING: "test_a_missing_binary_says_install_tritonclient",
    BenchFailure.NOT_EXECUTABLE: "test_a_binary_that_is_not_executable_cannot_be_run",
    BenchFailure.LIBRARIES_MISSING: "errors/libraries_missing.txt",
    BenchFailure.UNREACHABLE: "errors/unreachable.*.txt",
    BenchFailure.WRONG_PROTOCOL: "errors/wrong_protocol.*.txt",
    BenchFailure.MODEL_NOT_FOUND: "errors/model_not_found.*.txt",
    BenchFailure.BAD_INPUT_DATA: "errors/bad_input_data.*.txt",
    BenchFailure.UNSTABLE: "errors/unstable.txt",
    BenchFailure.SHARED_MEMORY: "errors/shared_memory.*.txt",
    BenchFailure.RESTRICTED: "errors/restricted.*.txt",
    BenchFailure.SHM_RESTRICTED: "errors/shm_restricted.*.txt",
    BenchFailure.TIMEOUT: "test_a_hung_perf_analyzer_is_killed_at_the_deadline",
    BenchFailure.STALLED: "test_a_model_that_finishes_no_request_stops_the_run_before_the_deadline",
    BenchFailure.CANCELLED: "test_a_cancelled_run_kills_perf_analyzer",
    BenchFailure.OTHER: "test_an_unknown_output_is_other_and_quotes_it",
}


def test_every_failure_has_an_error_a_message_and_a_test_case() -> None:
    assert set(FAILURES) == set(BenchFailure), f"add to FAILURES: {set(BenchFailure) - set(FAILURES)}"
    missing = set(BenchFailure) - set(FAILURE_CASES)
    assert set(FAILURE_CASES) == set(BenchFailure), f"add a case for: {missing}"
    for case in FAILURE_CASES.values():
        if case.startswith("errors/"):
            assert list(ASSETS.glob(case)), f"no recorded output {case}"
        else:
            assert case in globals(), f"no test {case}"


@pytest.mark.parametrize("path", ERRORS, ids=lambda p: p.stem)
def test_each_recorded_output_maps_to_the_failure_its_name_says(path: Path) -> None:
    expected = BenchFailure[path.name.split(".")[0].upper()]
    assert classify(output=path.read_text()) is expected
    err = bench_failures.bench_error(expected, SETTINGS, detail=bench_failures.error_line(path.read_text()))
    assert type(err) is FAILURES[expected][0]
    assert bench_failures.error_line(path.read_text()) in str(err)


def test_every_output_marker_is_reached_by_a_recording() -> None:
    texts = [path.read_text().lower() for path in ERRORS]
    unused = [marker for marker, _ in OUTPUT_FAILURES if not any(marker in t for t in texts)]
    assert not unused, f"no recorded output has {unused}"


def test_an_unknown_output_is_other_and_quotes_it() -> None:
    assert classify(output="error: something new went wrong") is BenchFailure.OTHER
    err = bench_failures.bench_error(BenchFailure.OTHER, SETTINGS, detail="error: something new went wrong")
    assert type(err) is PerfAnalyzerError and "something new went wrong" in str(err)


def test_every_message_is_one_line_with_the_cause_then_the_next_step() -> None:
    for failure in BenchFailure:
        err = bench_failures.bench_error(failure, SETTINGS, binary="/x/perf_analyzer", detail="boom")
        text = str(err)
        assert isinstance(err, GeAdminError)
        assert "\n" not in text and text.startswith("load test of digits_classifier")
        assert failure in (BenchFailure.OTHER,
                           BenchFailure.CANCELLED) or " — " in text, f"{failure}: no next step"


def test_every_exception_of_starting_the_binary_is_mapped() -> None:
    classes = {obj for obj in vars(subprocess).values()
               if inspect.isclass(obj) and issubclass(obj, BaseException)}
    classes |= {obj for obj in vars(builtins).values() if inspect.isclass(obj) and issubclass(obj, OSError)}
    unmapped = [c for c in classes if not any(issubclass(c, kind) for kind, _ in EXCEPTION_FAILURES)]
    assert not unmapped, f"add to EXCEPTION_FAILURES: {unmapped}"
    seen: list[type[BaseException]] = []
    for kind, _ in EXCEPTION_FAILURES:
        assert not [base for base in seen if issubclass(kind, base)], f"{kind} is shadowed"
        seen.append(kind)


def test_a_missing_binary_says_install_tritonclient(tmp_path: Path) -> None:
    with pytest.raises(PerfAnalyzerMissingError, match=r"no perf_analyzer at .*install `tritonclient"):
        run_perf_analyzer(SETTINGS, binary=tmp_path / "nowhere" / "perf_analyzer", auth=admin_auth())


def test_a_binary_that_is_not_executable_cannot_be_run(tmp_path: Path) -> None:
    plain = tmp_path / "perf_analyzer"
    plain.write_text("not a program")
    with pytest.raises(PerfAnalyzerMissingError, match=r"cannot run .*chmod \+x"):
        run_perf_analyzer(SETTINGS, binary=plain, auth=admin_auth())


def test_a_sweep_that_stops_at_an_unstable_load_keeps_its_points_and_names_the_load(tmp_path: Path) -> None:
    double = perf_analyzer_double(tmp_path, (ASSETS / "errors" / "unstable.txt").read_text(), report_rows=1)
    run = run_perf_analyzer(SETTINGS, binary=double, auth=admin_auth())
    assert [p.load for p in run.points] == [1.0]
    assert run.cut_short.startswith("load test of digits_classifier: no stable measurement (concurrency 2 "
                                    "not measured, 1 of 2 loads were: Failed to obtain stable")
    assert "raise the measurement interval" in run.cut_short  # the next step comes along


def test_a_sweep_that_stopped_before_its_first_point_fails(tmp_path: Path) -> None:
    double = perf_analyzer_double(tmp_path, (ASSETS / "errors" / "unstable.txt").read_text(), report_rows=0)
    with pytest.raises(UnstableMeasurementError, match=r"no stable measurement \(concurrency 1 not measured, "
                                                       r"0 of 2 loads were: Failed to obtain stable"):
        run_perf_analyzer(SETTINGS, binary=double, auth=admin_auth())


def test_the_double_s_full_report_is_every_point(tmp_path: Path) -> None:
    """The double above, with both points: the check that caught the short sweep passes it."""
    double = perf_analyzer_double(tmp_path, "", report_rows=2)
    run = run_perf_analyzer(SETTINGS, binary=double, auth=admin_auth())
    assert [p.load for p in run.points] == [1.0, 2.0] and run.cut_short == ""


def test_an_exit_without_a_report_is_the_failure_its_output_names(tmp_path: Path) -> None:
    double = perf_analyzer_double(tmp_path, (ASSETS / "errors" / "unstable.txt").read_text())
    with pytest.raises(UnstableMeasurementError, match=r"no stable measurement \(Failed to obtain stable"):
        run_perf_analyzer(SETTINGS, binary=double, auth=admin_auth())


def test_an_exit_without_a_report_keeps_what_perf_analyzer_said(tmp_path: Path) -> None:
    double = perf_analyzer_double(tmp_path, "Request concurrency: 1\nsomething odd happened\n")
    said = r"it said: Request concurrency: 1$"
    with pytest.raises(PerfAnalyzerError, match=r"perf_analyzer failed: it exited 0 but wrote no report "
                                                r"\(No such file or directory\); " + said):
        run_perf_analyzer(SETTINGS, binary=double, auth=admin_auth())


def test_no_stability_gate_is_a_flag_the_real_perf_analyzer_parses(tmp_path: Path) -> None:
    """The judged measurements' "no gate" reaches perf_analyzer as a number it accepts: the run
    gets as far as connecting (nothing listens on port 1), not a refused flag."""
    from geadmin.ops.bench.params import NO_STABILITY_GATE
    settings = BenchSettings("m", "http://127.0.0.1:1", stability_percentage=NO_STABILITY_GATE)
    argv = perf_argv(settings, Path("pa"), (1,), input_path=None, csv_path=tmp_path / "r.csv", batch_size=1)
    assert argv[argv.index("--stability-percentage") + 1] == "1e+06"
    with pytest.raises(TritonUnreachableError, match=r"no Triton answers at 127.0.0.1:1 over http"):
        run_perf_analyzer(settings, auth=admin_auth())
    with pytest.raises(BenchSettingsError, match=r"stability percentage must be from 0 to 1e\+06"):
        BenchSettings("m", "http://127.0.0.1:1", stability_percentage=2e6)
    no_gate = BenchSettings("m", "http://127.0.0.1:1", stability_percentage=0)  # the page's and CLI's "off"
    argv = perf_argv(no_gate, Path("pa"), (1,), input_path=None, csv_path=tmp_path / "r.csv", batch_size=1)
    assert argv[argv.index("--stability-percentage") + 1] == "1e+06"


@pytest.fixture
def black_hole() -> Iterator[str]:
    """A port that accepts connections and never answers: perf_analyzer waits on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def perf_analyzer_pids(model: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"perf_analyzer") and model.encode() in argv:
                pids.append(int(entry.name))
    return pids


def test_a_hung_perf_analyzer_is_killed_at_the_deadline(black_hole: str) -> None:
    settings = BenchSettings("deadline_case", black_hole, loads=(1,), timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(PerfAnalyzerTimeoutError, match=r"ran over 1s and was stopped — test fewer points"):
        run_perf_analyzer(settings, auth=admin_auth())
    assert time.monotonic() - started < 1.0 + STOP_GRACE_S + 2.0
    assert perf_analyzer_pids("deadline_case") == []


def test_a_model_that_finishes_no_request_stops_the_run_before_the_deadline(
        black_hole: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hung model keeps perf_analyzer waiting until the deadline: when the model's finished
    requests stand still for the stall time, the run stops and says so. One whose count moves
    runs on (here until its deadline: the black hole answers nothing)."""
    monkeypatch.setattr(invocation, "STALL_MIN_S", 2.0)
    monkeypatch.setattr(invocation, "STALL_POLL_S", 0.2)
    settings = BenchSettings("stall_case", black_hole, loads=(1,), timeout_s=60.0,
                             measurement_interval_ms=500)
    started = time.monotonic()
    said = (r"^load test of stall_case: the model finished none of perf_analyzer's requests in 2s, so "
            r"perf_analyzer was stopped — it is hung")
    with pytest.raises(PerfAnalyzerTimeoutError, match=said):
        run_perf_analyzer(settings, auth=admin_auth(), finished=lambda: 7)
    assert time.monotonic() - started < 2.0 + STOP_GRACE_S + 3.0
    assert perf_analyzer_pids("stall_case") == []
    counts = iter(range(10_000))
    moving = replace(settings, timeout_s=4.0)
    with pytest.raises(PerfAnalyzerTimeoutError, match="ran over 4s"):
        run_perf_analyzer(moving, auth=admin_auth(), finished=lambda: next(counts))
    slow_rate = BenchSettings("m", black_hole, REQUEST_RATE, (0.05, 1.0), measurement_interval_ms=500)
    assert invocation.Invocation(slow_rate, [], {}, 0.0, None, print).stall_s == 60.0  # 3 gaps of 20 s
    unread = replace(settings, timeout_s=4.0)  # statistics that cannot be read never stop a run
    with pytest.raises(PerfAnalyzerTimeoutError, match="ran over 4s"):
        run_perf_analyzer(unread, auth=admin_auth(), finished=lambda: None)


def test_a_cancelled_run_kills_perf_analyzer(black_hole: str) -> None:
    settings = BenchSettings("cancel_case", black_hole, loads=(1,))
    cancel = threading.Event()
    seen: list[tuple[int, int, str]] = []

    def progress(done: int, total: int, text: str) -> None:
        seen.append((done, total, text))
        threading.Timer(0.5, cancel.set).start()

    with pytest.raises(BenchCancelledError, match="cancelled; perf_analyzer was stopped"):
        run_perf_analyzer(settings, cancel=cancel, progress=progress, auth=admin_auth())
    assert seen[0][:2] == (0, 1)
    assert perf_analyzer_pids("cancel_case") == []


def test_ctrl_c_during_a_run_kills_perf_analyzer_too(black_hole: str) -> None:
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_perf_analyzer(BenchSettings("interrupt_case", black_hole, loads=(1,)), auth=admin_auth())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert perf_analyzer_pids("interrupt_case") == []


def test_the_venv_binary_is_found() -> None:
    found = find_perf_analyzer()
    assert found.name == "perf_analyzer" and os.access(found, os.X_OK)


# -- planning the invocations --------------------------------------------------------------
@pytest.mark.parametrize(("loads", "plan"), [
    ((1, 2, 3), [(1, 2, 3)]),
    ((1, 4, 16), [(1, 4), (16,)]),
    ((2, 4, 6, 16), [(2, 4, 6), (16,)]),
    ((8,), [(8,)]),
    ((4, 2), [(4,), (2,)]),
    ((0.5, 1.0), [(0.5,), (1.0,)]),  # fractional rates: one each, no float stepping
])
def test_evenly_stepping_loads_share_one_invocation(loads: tuple[float, ...],
                                                     plan: list[tuple[float, ...]]) -> None:
    assert plan_invocations(loads) == plan


def test_the_command_is_an_argument_list_with_the_range_and_the_protocol(tmp_path: Path) -> None:
    settings = BenchSettings("m", "grpc://127.0.0.1:8001", REQUEST_RATE, (10, 20),
                             measurement_interval_ms=500, measurement_mode="count_windows",
                             measurement_request_count=30)
    argv = perf_argv(settings, Path("/bin/perf_analyzer"), (10, 20), input_path=tmp_path / "in.json",
                     csv_path=tmp_path / "r.csv", batch_size=2)
    joined = " ".join(argv)
    assert argv[:7] == ["/bin/perf_analyzer", "-m", "m", "-u", "127.0.0.1:8001", "-i", "grpc"]
    assert "--request-rate-range 10:20:10" in joined and "--measurement-interval 500" in joined
    assert "--measurement-mode count_windows" in joined and "--measurement-request-count 30" in joined
    assert f"--input-data {tmp_path / 'in.json'}" in joined and "-b 2" in joined and "--verbose-csv" in joined


def test_system_shared_memory_is_passed_with_the_output_region_size(tmp_path: Path) -> None:
    settings = BenchSettings("m", "grpc://127.0.0.1:8001", loads=(1,), shared_memory="system",
                             output_shared_memory_bytes=4 << 20)
    argv = perf_argv(settings, Path("pa"), (1,), input_path=None, csv_path=tmp_path / "r.csv",
                     batch_size=1)
    joined = " ".join(argv)
    assert "--shared-memory system" in joined and f"--output-shared-memory-size {4 << 20}" in joined
    plain = perf_argv(BenchSettings("m", "grpc://127.0.0.1:8001"), Path("pa"), (1,), input_path=None,
                      csv_path=tmp_path / "r.csv", batch_size=1)
    assert "--shared-memory" not in plain


def test_shared_memory_over_http_carries_the_key_for_the_restricted_registration(tmp_path: Path) -> None:
    """Every stack geadmin starts keys the shared-memory API: perf_analyzer registers its regions
    with the server's key over HTTP (-H); over gRPC 2.51 cannot send it, so it is not given."""
    def argv(url: str) -> list[str]:
        settings = BenchSettings("m", url, loads=(1,), shared_memory="system")
        return perf_argv(settings, Path("pa"), (1,), input_path=None, csv_path=tmp_path / "r.csv",
                         batch_size=1, admin_key="k3y")
    over_http = argv("http://127.0.0.1:8000")
    assert over_http[over_http.index("-H") + 1] == "admin-key:k3y"
    assert "--shared-memory" in over_http
    assert not [a for a in argv("grpc://127.0.0.1:8001") if "k3y" in a]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"loads": ()}, "one or more loads"),
    ({"loads": (0,)}, "above 0"),
    ({"loads": (1.5,)}, "whole numbers"),
    ({"mode": "sweep"}, "mode must be one of"),
    ({"measurement_mode": "forever"}, "time_windows or count_windows"),
    ({"shared_memory": "cuda"}, "shared memory is one of none, system"),
    ({"output_shared_memory_bytes": 0}, "at least 1 byte"),
])
def test_bad_settings_are_refused_before_running(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(PerfAnalyzerError, match=match):
        BenchSettings("m", "http://127.0.0.1:8000", **kwargs)  # type: ignore[arg-type]


def test_tls_endpoints_are_refused_with_the_reason(tmp_path: Path) -> None:
    settings = BenchSettings("m", "https://example.com:8000")
    with pytest.raises(PerfAnalyzerError, match="TLS"):
        perf_argv(settings, Path("pa"), (1,), input_path=None, csv_path=tmp_path / "r.csv", batch_size=1)


# -- the input data ------------------------------------------------------------------------
DIGITS = ModelSpec("digits", "1", 32, (InputSpec("features", "FP32", (64,), True),),
                   (OutputSpec("probabilities", "FP32", (10,)),))
MIXED = ModelSpec("mixed", "1", 0, (InputSpec("half", "FP16", (2,), False),
                                    InputSpec("text", "BYTES", (1,), False),
                                    InputSpec("flags", "BOOL", (2,), False)), ())


def test_a_batched_request_becomes_one_step_per_item_and_the_batch_size() -> None:
    request = build_request(DIGITS, batch_size=3, seed=7)
    document, batch = perf_input_data(DIGITS, request)
    assert batch == 3 and len(document["data"]) == 3
    sent = request.input("features").data
    for index, step in enumerate(document["data"]):
        assert step["features"]["shape"] == [64]
        assert np.allclose(step["features"]["content"], sent[index])


def test_an_unbatched_request_is_one_step_with_its_full_shape_and_fp16_as_raw_bytes() -> None:
    request = build_request(MIXED, {"text": InputSource(SourceKind.TEXT, "héllo")}, seed=1)
    document, batch = perf_input_data(MIXED, request)
    assert batch == 1 and len(document["data"]) == 1
    step = document["data"][0]
    half = request.input("half")
    assert step["half"] == {"b64": base64.b64encode(wire_bytes(half)).decode(), "shape": [2]}
    assert step["text"] == {"content": ["héllo"], "shape": [1]}
    assert step["flags"]["content"] == [bool(v) for v in request.input("flags").data]


def test_bytes_that_are_not_text_cannot_go_to_perf_analyzer() -> None:
    request = build_request(MIXED, seed=1)
    binary = Tensor("text", "BYTES", np.array([b"\xff\xfe"], dtype=np.object_))
    broken = type(request)(request.model, (request.inputs[0], binary, request.inputs[2]))
    with pytest.raises(InferInputError, match="only as UTF-8 text"):
        perf_input_data(MIXED, broken)


def test_the_cli_reads_loads_and_sources() -> None:
    assert parse_loads("1, 4,16") == (1.0, 4.0, 16.0)
    with pytest.raises(BenchSettingsError, match="numbers separated by commas"):
        parse_loads("1,many")
    sources, default = parse_sources(["features=zeros", "ones", "text=text:a=b"])
    assert sources["features"].kind is SourceKind.ZEROS and default.kind is SourceKind.ONES
    assert sources["text"] == InputSource(SourceKind.TEXT, "a=b")


# -- runs in the workspace database ----------------------------------------------------------
def point(load: float, throughput: float, p99_ms: float) -> BenchPoint:
    return BenchPoint(load, throughput, 1.0, 2.0, 3.0, p99_ms, 1.5, 0.1, 0.1, 0.2, 0.5, 0.01, 0.3, 0.02)


def a_run(label: str, points: tuple[BenchPoint, ...], minute: int = 0) -> BenchRun:
    return BenchRun("digits_classifier", "http://127.0.0.1:8000", CONCURRENCY, points,
                    datetime(2026, 1, 1, 12, minute, tzinfo=timezone.utc), "ann", label,
                    SETTINGS.record())


def test_a_saved_run_is_listed_and_loaded_back_the_same(tmp_path: Path) -> None:
    first = save_run(a_run("dynamic batching off", (point(1, 100, 4.0), point(16, 500, 40.0))), tmp_path)
    second = save_run(a_run("dynamic batching on", (point(1, 110, 3.0), point(16, 1800, 12.0)), 5), tmp_path)
    assert first.id is not None and second.id == first.id + 1
    listed = list_runs(tmp_path)
    assert [r.label for r in listed] == ["dynamic batching on", "dynamic batching off"]  # latest first
    assert load_run(first.id, tmp_path) == first
    assert listed[0].settings == SETTINGS.record()
    assert list_runs(tmp_path, model="other") == []
    assert "saved as run #" in render_run(second) and "note:" not in render_run(second)


def test_a_run_sent_late_says_where_and_is_kept_so(tmp_path: Path) -> None:
    late = replace(point(6000, 2842, 3.8), sent_late_pct=99.97)
    run = save_run(replace(a_run("rate", (point(100, 99.9, 1.6), late)), mode=REQUEST_RATE), tmp_path)
    assert run.id is not None
    assert load_run(run.id, tmp_path).points[1].sent_late_pct == pytest.approx(99.97)
    cut = save_run(replace(a_run("cut", (point(1, 100, 4.0),)), cut_short="no stable measurement"), tmp_path)
    assert load_run(cut.id or 0, tmp_path).cut_short == "no stable measurement"
    assert load_run(run.id, tmp_path).cut_short == ""
    text = render_run(run)
    assert text.endswith("note: perf_analyzer sent requests late (100 % at 6000 requests/s): the rate "
                         "offered was short of the rate asked — its host was busy, or every thread it had "
                         "waited on the server (give it more with --max-threads, or run it from a quieter "
                         "host)")


def test_compare_gives_throughput_and_p99_ratios_per_load_both_measured(tmp_path: Path) -> None:
    on = a_run("on", (point(1, 110, 3.0), point(4, 700, 6.0), point(16, 1800, 12.0)))
    off = a_run("off", (point(1, 100, 4.0), point(16, 500, 40.0)))
    result = compare(on, off)
    assert [r.load for r in result.rows] == [1.0, 16.0]
    assert result.rows[1].throughput_ratio == pytest.approx(3.6)
    assert result.rows[1].p99_ratio == pytest.approx(0.3)
    assert result.headline() == "3.6x the throughput at concurrency 16 (p99 0.30x)"
    assert "3.60x" in render_comparison(result)


def test_compare_with_nothing_measured_has_no_ratio() -> None:
    result = compare(a_run("a", (point(1, 10, 1.0),)), a_run("b", (point(1, 0, 0.0),)))
    assert math.isnan(result.rows[0].throughput_ratio)
    assert result.headline() == "no load was measured by both runs"


def test_compare_refuses_runs_of_different_kinds() -> None:
    rate = BenchRun("m", "u", REQUEST_RATE, (), datetime.now(timezone.utc))
    with pytest.raises(PerfAnalyzerError, match="cannot compare a concurrency run with a request_rate run"):
        compare(a_run("a", ()), rate)


def test_an_unknown_run_says_how_to_list_them(tmp_path: Path) -> None:
    with pytest.raises(PerfAnalyzerError, match=r"no load test #42.*geadmin bench --list"):
        load_run(42, tmp_path)


def test_a_version_2_workspace_gets_the_perf_tables_and_keeps_its_rows(tmp_path: Path) -> None:
    with db.connect(tmp_path, migrations=db.MIGRATIONS[:2]) as conn:
        conn.execute("INSERT INTO audit (at, who, origin, server, model, action, result) "
                     "VALUES ('2025-01-01T00:00:00.000000Z', 'ann', 'cli', '', 'm', 'apply', 'ok')")
    assert [m.name for m in db.MIGRATIONS].index("perf runs") == 3  # the upgrade adds it
    saved = save_run(a_run("after upgrade", (point(1, 100, 4.0),)), tmp_path)
    with db.connect(tmp_path) as conn:
        assert db.schema_version(conn) == len(db.MIGRATIONS)
        assert conn.execute("SELECT who FROM audit").fetchall() == [("ann",)]
    assert load_run(saved.id or 0, tmp_path).label == "after upgrade"


def test_a_judged_window_holds_enough_requests_and_stays_bounded() -> None:
    from geadmin.ops.bench.params import JUDGED_REQUESTS_PER_WINDOW, MAX_WINDOW_MS, judged_window_ms

    assert judged_window_ms(1000.0, 1000) == 1000  # 1,000 requests already
    assert judged_window_ms(5.0, 1000) == JUDGED_REQUESTS_PER_WINDOW * 200  # 20 requests at 5 req/s: 4 s
    assert judged_window_ms(0.001, 1000) == MAX_WINDOW_MS
    assert judged_window_ms(0.0, 1000) == MAX_WINDOW_MS


def sweep_step(monkeypatch: pytest.MonkeyPatch, measured_point: object, rate_rps: float = 10.0,
               p99_objective_ms: float = 50.0) -> tuple[SweepStep, list[BenchSettings]]:
    """One capacity-sweep step whose perf_analyzer run measures `measured_point`; the step and
    the settings perf_analyzer was asked for."""
    from types import SimpleNamespace

    from geadmin.ops.capacity import sweep

    asked: list[BenchSettings] = []

    def measured(settings: BenchSettings, **_: object) -> object:
        asked.append(settings)
        return SimpleNamespace(points=[measured_point])

    stats = SimpleNamespace(inference_stats=SimpleNamespace(fail=SimpleNamespace(count=0),
                                                            success=SimpleNamespace(count=0)))
    client = SimpleNamespace(url="http://127.0.0.1:1", model_statistics=lambda name: [stats])
    monkeypatch.setattr(sweep, "run_perf_analyzer", measured)
    step = sweep._Sweep(client, "m", p99_objective_ms, 0.0, 1000, admin_auth(), None, None,  # type: ignore[arg-type]
                        None, lambda text: None).step(rate_rps)
    return step, asked


def test_a_sweep_step_is_judged_by_the_objective_not_by_perf_analyzers_stability(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A step at 10 req/s asks perf_analyzer for a 2-s window and no stability gate of its own:
    on a busy host a 20 % gate called rates that held the objective "unmeasurable"."""
    from types import SimpleNamespace

    from geadmin.ops.bench.params import JUDGED_STABILITY_PERCENTAGE, NO_STABILITY_GATE

    held = SimpleNamespace(p99_ms=5.0, throughput_per_s=10.0, sent_late_pct=0.0)
    step, asked = sweep_step(monkeypatch, held)
    assert step.ok, step.why
    [settings] = asked
    assert settings.stability_percentage == JUDGED_STABILITY_PERCENTAGE == NO_STABILITY_GATE
    assert settings.measurement_interval_ms == 2000
    assert settings.max_threads == judged_sender_threads(10.0, 50.0)


def test_a_sweep_step_served_short_names_perf_analyzer_s_own_lateness(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    step, _ = sweep_step(monkeypatch, SimpleNamespace(p99_ms=5.0, throughput_per_s=6.0, sent_late_pct=40.0))
    assert not step.ok
    assert step.why == ("6/s does not keep up — perf_analyzer sent 40 % of the requests late (its host "
                        "was busy, or every thread it had waited on the server)")


def test_a_worker_s_own_error_leads_not_perf_analyzer_s_generic_line() -> None:
    """Recorded from perf_analyzer 2.51 against a python model with no execute method."""
    output = (ASSETS / "errors" / "other.worker_failed.txt").read_text()
    assert classify(output=output) is BenchFailure.OTHER
    assert bench_failures.error_line(output) == (
        "its requests failed: Failed to process the request(s) for model 'echo_0', message: Python model "
        "/tmp/repo-dir/repo/echo/1/model.py does not implement `execute` method.")
