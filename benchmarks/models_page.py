"""The Models page's data path against the raw Triton calls it needs, side by side.

A temporary repository of 201 models: one python model, 100 ensembles over it (loaded at
start) and 100 more ensembles left NOT loaded. A real tritonserver serves it on 127.0.0.1.

- page data: what one refresh of the Models page builds — `collect_rows` (index, configs,
  statistics, reasons from the log and the disk) plus the detail view of one model
  (`shown_config`, its statistics, `io_records`, `stats_records`);
- raw calls: the Triton calls that data needs, one after another on the same client — the
  repository index, the config of every loaded model, all statistics, and the detail's
  config and statistics.

One warm-up of each, then interleaved rounds (raw, page); medians in seconds.
Prints `BENCH <name> <value> <unit>` lines. Goal: page data <= 2x raw calls and <= 1 s.
Run: python benchmarks/models_page.py [--rounds 5] [--transport http|grpc]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from geadmin.diagnose import details  # noqa: E402
from geadmin.diagnose.rows import ModelRow, collect_rows  # noqa: E402
from geadmin.domain import ModelState  # noqa: E402
from geadmin.stack.tritonserver import TritonProcess  # noqa: E402
from geadmin.triton.client import TritonClient  # noqa: E402
from geadmin.triton.logs import LocalLogFile  # noqa: E402

SAMPLES = REPO_ROOT / "geadmin" / "samples" / "model_repository"
PYTHON_MODEL = "digits_classifier"
LOADED_ENSEMBLES = 100
IDLE_ENSEMBLES = 100
DETAIL_MODEL = "ens_loaded_000"
START_TIMEOUT_S = 120.0
MAX_ROUNDS = 20

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


def loaded_names() -> list[str]:
    return [f"ens_loaded_{i:03d}" for i in range(LOADED_ENSEMBLES)]


def idle_names() -> list[str]:
    return [f"ens_idle_{i:03d}" for i in range(IDLE_ENSEMBLES)]


def build_repository(root: Path) -> None:
    shutil.copytree(SAMPLES / PYTHON_MODEL, root / PYTHON_MODEL)
    for name in loaded_names() + idle_names():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(ENSEMBLE_CONFIG.format(name=name, step=PYTHON_MODEL))


def raw_calls(client: TritonClient) -> int:
    """The Triton calls the page data needs, made directly; returns how many were made."""
    index = client.repository_index()
    ready = sorted({e.name for e in index if e.state is ModelState.READY})
    for name in ready:
        client.model_config(name)
    client.model_statistics()
    client.model_config(DETAIL_MODEL)
    client.model_statistics(DETAIL_MODEL)
    return 1 + len(ready) + 1 + 2


def page_data(client: TritonClient, repository: Path, log: LocalLogFile) -> list[ModelRow]:
    """One refresh of the Models page: the table, and the detail of one model."""
    rows = collect_rows(client, repository, log)
    row = next(r for r in rows if r.name == DETAIL_MODEL)
    shown = details.shown_config(client, DETAIL_MODEL, repository, row.state)
    stats = client.model_statistics(DETAIL_MODEL) if row.state is ModelState.READY else []
    assert shown.config is not None and shown.normalized, shown.problem
    details.io_records(shown.config)
    details.stats_records(stats)
    return rows


def check_rows(rows: list[ModelRow]) -> None:
    """The benchmark measures the intended work only if the server is in the intended state."""
    by_state: dict[ModelState, int] = {}
    for row in rows:
        by_state[row.state] = by_state.get(row.state, 0) + 1
    expected = {ModelState.READY: LOADED_ENSEMBLES + 1, ModelState.NOT_LOADED: IDLE_ENSEMBLES}
    if by_state != expected:
        raise SystemExit(f"unexpected model states {by_state}, wanted {expected}")
    if any(r.reason for r in rows) or any(r.kind == "" for r in rows):
        raise SystemExit("unexpected rows: a reason, or a model without a config")


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help=f"measured rounds (1..{MAX_ROUNDS})")
    parser.add_argument("--transport", choices=("http", "grpc"), default="http")
    args = parser.parse_args()
    rounds = max(1, min(args.rounds, MAX_ROUNDS))

    scratch = Path(tempfile.mkdtemp(prefix="geadmin-bench-models-"))
    try:
        repository = scratch / "model_repository"
        build_repository(repository)
        server = TritonProcess(repository, models=[PYTHON_MODEL, *loaded_names()],
                               log_path=scratch / "tritonserver.log")
        started = time.perf_counter()
        server.start(timeout_s=START_TIMEOUT_S)
        try:
            print(f"# tritonserver up with {LOADED_ENSEMBLES + 1} loaded models "
                  f"in {time.perf_counter() - started:.1f}s", flush=True)
            url = server.http_url if args.transport == "http" else f"grpc://{server.grpc_url}"
            with TritonClient(url) as client:
                log = LocalLogFile(server.log_path)
                calls = raw_calls(client)  # warm-up of each
                check_rows(page_data(client, repository, log))
                raw, page = [], []
                for _ in range(rounds):
                    raw.append(timed(lambda: raw_calls(client)))
                    page.append(timed(lambda: page_data(client, repository, log)))
        finally:
            server.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    raw_s, page_s = statistics.median(raw), statistics.median(page)
    ratio = page_s / raw_s
    print(f"# {args.transport}, {rounds} rounds, {calls} raw calls per round; "
          f"raw {', '.join(f'{t:.3f}' for t in raw)}; page {', '.join(f'{t:.3f}' for t in page)}")
    print(f"BENCH models_page_rows_s {page_s:.3f} s")
    print(f"BENCH models_page_raw_calls_s {raw_s:.3f} s")
    print(f"BENCH models_page_ratio {ratio:.2f} x")
    met = ratio <= 2.0 and page_s <= 1.0
    print(f"# goal (page <= 2x raw and <= 1 s): {'met' if met else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
