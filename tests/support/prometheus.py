"""A real Prometheus server (Debian's `prometheus` package, installed by `make test`) for the
tests of the Prometheus history: scrapes the given /metrics URLs every second into a
temporary TSDB, on a free 127.0.0.1 port."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

import requests

from geadmin.stack.processes import free_port

SCRAPE_S = 1


class PrometheusServer:
    def __init__(self, root: Path, metrics_urls: Iterable[str], *, job: str = "triton") -> None:
        binary = shutil.which("prometheus")
        assert binary, "no prometheus binary: `make test` installs Debian's prometheus package " \
                       "(apt-get install prometheus)"
        self.binary = binary
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        targets = [urlsplit(u).netloc for u in metrics_urls]
        self.targets = len(targets)
        root.mkdir(parents=True, exist_ok=True)
        (root / "prometheus.yml").write_text(
            f"global:\n  scrape_interval: {SCRAPE_S}s\n  scrape_timeout: {SCRAPE_S}s\n"
            f"scrape_configs:\n  - job_name: {job}\n    static_configs:\n"
            f"      - targets: [{', '.join(repr(t) for t in targets)}]\n")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PrometheusServer:
        log = (self.root / "prometheus.log").open("wb")
        self.process = subprocess.Popen(
            [self.binary, f"--config.file={self.root / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.root / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.root / "prometheus.log").read_text()[-2000:]
            try:
                active = requests.get(f"{self.url}/api/v1/targets", timeout=1).json()["data"]["activeTargets"]
                if len(active) == self.targets:  # discovery done: every target is listed
                    return self
            except (requests.RequestException, ValueError, KeyError):
                pass  # not listening yet, or still starting
            time.sleep(0.2)
        log = (self.root / "prometheus.log").read_text()[-2000:]
        raise AssertionError(f"prometheus did not list its targets in 30 s: {log}")

    def value(self, query: str) -> float | None:
        """The first result of an instant query (None when it has none)."""
        body = requests.get(f"{self.url}/api/v1/query", params={"query": query}, timeout=5).json()
        result = body["data"]["result"]
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, query: str, timeout_s: float = 30) -> float:
        """Until the instant query has a result: data has been scraped."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.value(query)
            if found is not None:
                return found
            time.sleep(0.5)
        raise AssertionError(f"prometheus had no result for {query} within {timeout_s} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
