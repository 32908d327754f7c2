"""The telemetry pipeline's cost, side by side with what it cannot avoid.

1. Parse and derive: a /metrics page of 100 models in Triton 2.51's format (each model's
   lines copied from the recorded summary-latencies page, tests/unit/assets/telemetry), as the
   sampler handles it on every tick — `scrape.parse` of the page plus `derive` against the
   previous page — against `prometheus_client`'s parser alone reading the same text (every
   family and sample consumed). Interleaved rounds, medians. Goal: <= 1.5x.
2. The sampler's CPU: a real tritonserver serving 20 models (one python model and 19
   ensembles over it, all on its /metrics page), `geadmin sampler --interval 1` run as a
   process of its own into a temporary workspace; its CPU time (utime + stime from /proc)
   over a measured stretch after a warm-up, as % of one core. Goal: <= 5 %.

Prints `BENCH <name> <value> <unit>` lines.
Run: python benchmarks/telemetry.py [--rounds 30] [--measure-s 30]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from geadmin.stack.tritonserver import TritonProcess  # noqa: E402
from geadmin.telemetry.derive import derive  # noqa: E402
from geadmin.telemetry.history import store as history  # noqa: E402
from geadmin.telemetry.sources.scrape import parse, scrape  # noqa: E402

PAGE = REPO_ROOT / "tests" / "unit" / "assets" / "telemetry" / "metrics_2.51_summary_latencies.txt"
SAMPLES = REPO_ROOT / "geadmin" / "samples" / "model_repository"
PYTHON_MODEL = "digits_classifier"
PAGE_MODELS = 100
SERVER_MODELS = 20
_VALUE = re.compile(r"^(\S+\{[^}]*\}) (\S+)$")

ENSEMBLE_CONFIG = """name: "{name}"
platform: "ensemble"
max_batch_size: 32
input [ {{ name: "IMAGE_FEATURES" data_type: TYPE_FP32 dims: [ 64 ] }} ]
output [ {{ name: "PROBABILITIES" data_type: TYPE_FP32 dims: [ 10 ] }} ]
ensemble_scheduling {{
  step [
    {{
      model_name: "{step}"
      model_version: -1
      input_map {{ key: "features" value: "IMAGE_FEATURES" }}
      output_map {{ key: "probabilities" value: "PROBABILITIES" }}
    }}
  ]
}}
"""


# -- 1. parse and derive --------------------------------------------------------------
def page_of(models: int, scale: float) -> str:
    """The recorded page with its `probe_identity` lines repeated for `models` models (values
    times `scale`, so a later page has grown counters); the host lines kept once."""
    out = []
    for line in PAGE.read_text().splitlines():
        if 'model="py_np"' in line:
            continue
        if 'model="probe_identity"' not in line:
            out.append(line)
            continue
        match = _VALUE.match(line)
        assert match, line
        head, value = match.groups()
        for i in range(models):
            out.append(f'{head.replace("probe_identity", f"model_{i:03d}")} {float(value) * scale:g}')
    return "\n".join(out) + "\n"


def bare_parse(text: str) -> int:
    return sum(len(family.samples) for family in text_string_to_metric_families(text))


def parse_and_derive(before_text: str, after_text: str) -> int:
    before = parse(before_text, timestamp_s=1000.0)  # the previous tick's page, parsed then
    window = derive(before, parse(after_text, timestamp_s=1002.0))
    return len(window.models)


def parse_derive_ratio(rounds: int) -> None:
    before, after = page_of(PAGE_MODELS, 1.0), page_of(PAGE_MODELS, 1.5)
    assert parse_and_derive(before, after) == PAGE_MODELS
    previous = parse(before, timestamp_s=1000.0)
    bare: list[float] = []
    ours: list[float] = []
    bare_parse(after)  # warm-up
    derive(previous, parse(after, timestamp_s=1002.0))
    for _ in range(rounds):
        started = time.perf_counter()
        bare_parse(after)
        bare.append(time.perf_counter() - started)
        started = time.perf_counter()
        derive(previous, parse(after, timestamp_s=1002.0))  # one sampler tick's work on the page
        ours.append(time.perf_counter() - started)
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"page: {PAGE_MODELS} models, {after.count(chr(10))} lines, {bare_parse(after)} samples")
    print(f"BENCH metrics_prometheus_parse_s {b:.4f} s")
    print(f"BENCH metrics_parse_derive_s {o:.4f} s")
    print(f"BENCH metrics_parse_derive_ratio {o / b:.2f} x")


# -- 2. the sampler's CPU -------------------------------------------------------------
def build_repository(root: Path) -> list[str]:
    shutil.copytree(SAMPLES / PYTHON_MODEL, root / PYTHON_MODEL)
    names = [PYTHON_MODEL]
    for i in range(SERVER_MODELS - 1):
        name = f"ens_{i:02d}"
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(ENSEMBLE_CONFIG.format(name=name, step=PYTHON_MODEL))
        names.append(name)
    return names


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def sampler_cpu(measure_s: float) -> None:
    with tempfile.TemporaryDirectory(prefix="geadmin-bench-telemetry-") as scratch:
        root = Path(scratch)
        names = build_repository(root / "repo")
        server = TritonProcess(root / "repo", models=names, log_path=root / "tritonserver.log")
        server.start(timeout_s=180)
        process: subprocess.Popen[bytes] | None = None
        try:
            models = {s.label("model") for s in scrape(server.metrics_url).find("nv_inference_count")}
            print(f"server: {len(models)} models on {server.metrics_url}")
            env = {**os.environ, "GEADMIN_HOME": str(root / "home")}
            process = subprocess.Popen([sys.executable, "-m", "geadmin.cli", "sampler", "--interval", "1",
                                        "--metrics-url", server.metrics_url], env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(5)  # start-up (imports) and the first prune are not the steady state
            cpu0, wall0 = cpu_seconds(process.pid), time.monotonic()
            time.sleep(measure_s)
            cpu1, wall1 = cpu_seconds(process.pid), time.monotonic()
            series = history.model_series(server.metrics_url, history.window_since(10), home=root / "home")
            print(f"sampler: {len(series)} models in its history, "
                  f"{max((s.points for s in series), default=0)} points each")
            print(f"BENCH sampler_cpu_percent {100 * (cpu1 - cpu0) / (wall1 - wall0):.2f} %")
        finally:
            if process is not None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=15)
            server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--measure-s", type=float, default=30.0)
    args = parser.parse_args()
    parse_derive_ratio(args.rounds)
    sampler_cpu(args.measure_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
