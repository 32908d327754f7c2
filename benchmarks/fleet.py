"""Fleet status for N real tritonservers against one server's, side by side in one run.

Four tritonservers (the python backend, the packaged sample repository, every model loaded)
run on this machine. `geadmin.fleet.polling.poll` reads each server's health, repository index
and /metrics page; the fleet of 1, 2 and 4 servers is polled in turns (1, 2, 4, 1, 2, 4, ...)
so machine noise falls on every size alike, and the median of each is taken.

- `BENCH fleet_status_ms_<n>`: the median time of one fleet status of n servers.
- `BENCH fleet_status_ratio_4`: 4 servers' median / 1 server's. Polling is parallel, so the
  goal is well under 4 (sublinear); on 2 cores the servers' own work competes for the CPU.
- `BENCH fleet_per_server_ms`: the median time one server's poll takes inside the fleet
  status of 4 (`ServerView.took_s`), the figure the docs scale to 200 servers (32 at a time).
- The same sizes again with each server behind a proxy that adds `--rtt-ms` (5) of round
  trip (benchmarks/harness/delay_proxy.py), as servers across a network are:
  `BENCH fleet_status_ms_<n>_rtt` and `BENCH fleet_status_ratio_4_rtt`. On this machine the
  servers answer in well under a millisecond, so the local figures are mostly geadmin's own
  CPU (Python, under one interpreter lock); the network case is what parallel polling is for.
- `BENCH fleet_status_ms_200`: the median fleet status of 200 servers, each a loopback listener
  answering Triton's readiness, metadata, index and /metrics
  (benchmarks/harness/triton_listener_double.py says why 200 real tritonservers cannot run
  here); `BENCH fleet_status_index_reads_200`: the index reads per server and status (goal 1).
- `BENCH fleet_status_ms_4_configs` / `fleet_status_configs_ratio_4`: the fleet status of the 4
  real servers with `--configs` (each server's served config of its 5 models read and compared),
  polled in turns with one without, and the ratio of the two medians; `BENCH
  fleet_status_ms_200_configs` / `fleet_status_configs_ratio_200` the same for the 200 doubles
  (2 models each), and `BENCH fleet_status_config_reads_200` their config reads per server and
  status. What decides whether `fleet status` compares configs by default (docs/guide/fleet.md).
- `BENCH fleet_index_reads_per_step`: a version rollout (`text_normalize` v2 beside v1, then v1
  retired) across the 4 real servers, each in its own repository, one wave each: the most
  repository-index reads any server took in one step (goal <= 2; the count is
  tests/support/index_reads.py's, every read going to Triton).
Run: python benchmarks/fleet.py [--rounds 15] [--rtt-ms 5]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from harness.delay_proxy import DelayProxy  # noqa: E402
from harness.triton_listener_double import TritonListenerDouble  # noqa: E402

from geadmin.access import guard  # noqa: E402
from geadmin.fleet.discovery import Discovery, Fleet  # noqa: E402
from geadmin.fleet.gate import GateSettings  # noqa: E402
from geadmin.fleet.members import Member, Trust  # noqa: E402
from geadmin.fleet.polling import close_clients, poll  # noqa: E402
from geadmin.fleet.versions import roll_version  # noqa: E402
from geadmin.stack.tritonserver import TritonProcess  # noqa: E402
from geadmin.triton.servers import ServerSpec  # noqa: E402
from tests.support.index_reads import counting  # noqa: E402
from tests.support.samples import copy_samples  # noqa: E402

SIZES = (1, 2, 4)
MANY = 200
VERSIONED = "text_normalize"


def bench(name: str, value: float, unit: str, note: str = "") -> None:
    print(f"BENCH {name} {value:.4g} {unit}" + (f"  # {note}" if note else ""), flush=True)


def fleet_of(urls: Sequence[tuple[str, str]], repositories: Sequence[Path] = ()) -> Discovery:
    """(HTTP URL, metrics URL) per server; their repositories, when a rollout writes them."""
    trust = Trust(True, "the benchmark's own servers")  # polled as trusted members are: the index
    members = tuple(Member(ServerSpec(f"t{i}", http, metrics_url=metrics), "bench", trust=trust,
                           repository=repositories[i] if repositories else None)
                    for i, (http, metrics) in enumerate(urls))
    return Discovery(Fleet("bench", ("servers",)), members, ())


def reads_per_step(fleet: Discovery, home: Path) -> int:
    """The most index reads one server took in one step of a version rollout (see the docstring)."""
    for member in fleet.members:
        assert member.repository is not None
        shutil.copytree(member.repository / VERSIONED / "1", member.repository / VERSIONED / "2")
    with counting() as reads:
        done = roll_version(fleet.members, VERSIONED, 2, gate=GateSettings(requests=0), auth=guard.os_user(),
                            fleet="bench", home=home, progress=reads.progress)
    assert done.ok, done.headline
    steps = [step for step in reads.counts if step.startswith(("load", "retire"))]
    assert len(steps) == 2, dict(reads.counts)
    return max(reads.most(step) for step in steps)


def many(rounds: int) -> tuple[float, float, float, float]:
    """Of MANY listener doubles: the median ms of a fleet status without and with configs (in
    turns), index reads per server and status, config reads per server and status with configs."""
    with TritonListenerDouble(MANY) as double:
        fleet = fleet_of(double.urls())
        poll(fleet, configs=True)  # warm: a client per server
        plain, configs = with_and_without_configs(fleet, rounds)
        close_clients()
        index_reads = sum(double.index_reads.values()) / (MANY * (2 * rounds + 1))
        config_reads = sum(double.config_reads.values()) / (MANY * (rounds + 1))
    return plain, configs, index_reads, config_reads


def with_and_without_configs(fleet: Discovery, rounds: int) -> tuple[float, float]:
    """Median ms of a fleet status without configs, and with them, polled in turns."""
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for configs in (False, True):
            started = time.perf_counter()
            status = poll(fleet, configs=configs)
            times[configs].append(time.perf_counter() - started)
            assert not status.down(), status.down()[:5]
            assert not status.configs_not_compared(), status.configs_not_compared()[:5]
    return statistics.median(times[False]) * 1000, statistics.median(times[True]) * 1000


def measure(fleets: dict[int, Discovery], rounds: int) -> tuple[dict[int, float], list[float]]:
    """Median ms per fleet size, sizes in turns; and each server's poll time in the largest."""
    for n in SIZES:  # warm: connections and the first metrics pages
        poll(fleets[n])
    times: dict[int, list[float]] = {n: [] for n in SIZES}
    per_server: list[float] = []
    for _ in range(rounds):
        for n in SIZES:
            started = time.perf_counter()
            status = poll(fleets[n])
            times[n].append(time.perf_counter() - started)
            assert not status.down(), status.down()
            if n == max(SIZES):
                per_server += [s.took_s for s in status.servers]
    return {n: statistics.median(t) * 1000 for n, t in times.items()}, per_server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--rtt-ms", type=float, default=5.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="geadmin-bench-fleet-") as tmp, contextlib.ExitStack() as stack:
        root = Path(tmp)
        servers = [TritonProcess(copy_samples(root / f"repo{i}"), log_path=root / f"triton{i}.log")
                   for i in range(max(SIZES))]
        try:
            for server in servers:
                server.start()
            local = [(s.http_url, s.metrics_url) for s in servers]
            medians, per_server = measure({n: fleet_of(local[:n]) for n in SIZES}, args.rounds)
            plain_4, configs_4 = with_and_without_configs(fleet_of(local), args.rounds)
            proxied = []
            for s in servers:
                http = stack.enter_context(DelayProxy(s.ports.http, args.rtt_ms))
                metrics = stack.enter_context(DelayProxy(s.ports.metrics, args.rtt_ms))
                proxied.append((f"http://127.0.0.1:{http.port}", f"http://127.0.0.1:{metrics.port}/metrics"))
            far, _ = measure({n: fleet_of(proxied[:n]) for n in SIZES}, args.rounds)
            close_clients()
            steps = reads_per_step(fleet_of(local, [s.repository for s in servers]), root / "home")
        finally:
            for server in servers:
                server.stop()
    for n in SIZES:
        bench(f"fleet_status_ms_{n}", medians[n], "ms", f"median of {args.rounds}")
    bench("fleet_status_ratio_4", medians[4] / medians[1], "x", "4 servers / 1 server, on this machine")
    for n in SIZES:
        bench(f"fleet_status_ms_{n}_rtt", far[n], "ms", f"each server {args.rtt_ms:g} ms of round trip away")
    bench("fleet_status_ratio_4_rtt", far[4] / far[1], "x",
          "4 servers / 1 server across the network (goal < 4)")
    one = statistics.median(per_server) * 1000
    bench("fleet_per_server_ms", one, "ms", "one server's poll inside a fleet of 4, on this machine")
    bench("fleet_index_reads_per_step", steps, "reads",
          "the most repository-index reads one server took in one step of a version rollout (goal <= 2)")
    bench("fleet_status_ms_4_configs", configs_4, "ms", "4 real servers, 5 models each, with --configs")
    bench("fleet_status_configs_ratio_4", configs_4 / plain_4, "x", "with --configs / without, in turns")
    many_ms, many_configs_ms, many_reads, config_reads = many(max(3, min(args.rounds, 5)))
    bench(f"fleet_status_ms_{MANY}", many_ms, "ms",
          f"{MANY} loopback listener doubles of Triton (benchmarks/harness/triton_listener_double.py)")
    bench(f"fleet_status_index_reads_{MANY}", many_reads, "reads", "per server and fleet status (goal 1)")
    bench(f"fleet_status_ms_{MANY}_configs", many_configs_ms, "ms",
          f"{MANY} doubles, 2 models each, with --configs")
    bench(f"fleet_status_configs_ratio_{MANY}", many_configs_ms / many_ms, "x",
          "with --configs / without, in turns")
    bench(f"fleet_status_config_reads_{MANY}", config_reads, "reads",
          "per server and fleet status with --configs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
