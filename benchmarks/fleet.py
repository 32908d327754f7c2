"""Fleet status for N real tritonservers against one server's, side by side in one run.

Four tritonservers (the python backend, the packaged sample repository, every model loaded)
run on this machine. `geadmin.fleet.status.poll` reads each server's health, repository index
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
Run: python benchmarks/fleet.py [--rounds 15] [--rtt-ms 5]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from harness.delay_proxy import DelayProxy  # noqa: E402

from geadmin.fleet.discovery import Discovery, Fleet  # noqa: E402
from geadmin.fleet.members import Member, Trust  # noqa: E402
from geadmin.fleet.status import MAX_PARALLEL, poll  # noqa: E402
from geadmin.stack.tritonserver import TritonProcess  # noqa: E402
from geadmin.triton.servers import ServerSpec  # noqa: E402
from tests.support.samples import copy_samples  # noqa: E402

SIZES = (1, 2, 4)


def bench(name: str, value: float, unit: str, note: str = "") -> None:
    print(f"BENCH {name} {value:.4g} {unit}" + (f"  # {note}" if note else ""), flush=True)


def fleet_of(urls: Sequence[tuple[str, str]]) -> Discovery:
    """(HTTP URL, metrics URL) per server."""
    trust = Trust(True, "the benchmark's own servers")  # polled as trusted members are: the index
    members = tuple(Member(ServerSpec(f"t{i}", http, metrics_url=metrics), "bench", trust=trust)
                    for i, (http, metrics) in enumerate(urls))
    return Discovery(Fleet("bench", ("servers",)), members, ())


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
            proxied = []
            for s in servers:
                http = stack.enter_context(DelayProxy(s.ports.http, args.rtt_ms))
                metrics = stack.enter_context(DelayProxy(s.ports.metrics, args.rtt_ms))
                proxied.append((f"http://127.0.0.1:{http.port}", f"http://127.0.0.1:{metrics.port}/metrics"))
            far, _ = measure({n: fleet_of(proxied[:n]) for n in SIZES}, args.rounds)
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
    waves = math.ceil(200 / MAX_PARALLEL)
    # geadmin's own work per server is serialized (one interpreter lock): 200 x one server's
    # status here; the network waits overlap, MAX_PARALLEL at a time: `waves` x one across it.
    estimate_s = (200 * medians[1] + waves * far[1]) / 1000
    bench("fleet_status_200_estimate_s", estimate_s, "s",
          f"on paper: 200 servers {args.rtt_ms:g} ms away = 200 x {medians[1]:.1f} ms here + {waves} rounds "
          f"of {far[1]:.0f} ms across the network")
    return 0


if __name__ == "__main__":
    sys.exit(main())
