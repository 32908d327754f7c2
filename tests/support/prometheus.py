"""A real Prometheus server and Alertmanager (Debian's `prometheus` and
`prometheus-alertmanager` packages, installed by `make test`): Prometheus scrapes the given
/metrics URLs every second into a temporary TSDB, and can evaluate rule files every second
and send alerts to an Alertmanager; each on a free 127.0.0.1 port."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

import requests

from geadmin.stack.processes import free_port

SCRAPE_S = 1


class _Daemon:
    process: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


class PrometheusServer(_Daemon):
    def __init__(self, root: Path, metrics_urls: Iterable[str], *, job: str = "triton",
                 more_jobs: Mapping[str, Iterable[str]] | None = None, rules: Path | None = None,
                 alertmanager: str | None = None,
                 labels: Mapping[str, Mapping[str, str]] | None = None) -> None:
        """`labels`: static target labels by /metrics URL (a node, a pod), as service discovery gives."""
        binary = shutil.which("prometheus")
        assert binary, "no prometheus binary: `make test` installs Debian's prometheus package " \
                       "(apt-get install prometheus)"
        self.binary = binary
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        jobs = {job: list(metrics_urls), **{name: list(urls) for name, urls in (more_jobs or {}).items()}}
        self.targets = sum(len(urls) for urls in jobs.values())
        root.mkdir(parents=True, exist_ok=True)
        config = (f"global:\n  scrape_interval: {SCRAPE_S}s\n  scrape_timeout: {SCRAPE_S}s\n"
                  f"  evaluation_interval: {SCRAPE_S}s\nscrape_configs:\n")
        for name, urls in jobs.items():
            config += f"  - job_name: {name}\n    static_configs:\n"
            for url in urls:  # one entry per target: each its own labels
                config += f"      - targets: [{urlsplit(url).netloc!r}]\n"
                if (labels or {}).get(url):
                    pairs = ", ".join(f"{k}: {v!r}" for k, v in (labels or {})[url].items())
                    config += f"        labels: {{{pairs}}}\n"
        if rules is not None:
            config += f"rule_files:\n  - {rules}\n"
        if alertmanager is not None:
            config += ("alerting:\n  alertmanagers:\n    - static_configs:\n"
                       f"        - targets: [{urlsplit(alertmanager).netloc!r}]\n")
        (root / "prometheus.yml").write_text(config)
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


class AlertmanagerServer(_Daemon):
    """Alertmanager with one receiver that keeps alerts in its API (what geadmin reads), no
    cluster, grouping waits of a second."""

    def __init__(self, root: Path) -> None:
        binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
        assert binary, "no alertmanager binary: `make test` installs Debian's prometheus-alertmanager package"
        self.binary = binary
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        root.mkdir(parents=True, exist_ok=True)
        (root / "alertmanager.yml").write_text(
            "route:\n  receiver: keep\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\n"
            "receivers:\n  - name: keep\n")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> AlertmanagerServer:
        log = (self.root / "alertmanager.log").open("wb")
        self.process = subprocess.Popen(
            [self.binary, f"--config.file={self.root / 'alertmanager.yml'}",
             f"--storage.path={self.root / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--cluster.listen-address="], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.root / "alertmanager.log").read_text()[-2000:]
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass  # not listening yet
            time.sleep(0.2)
        log = (self.root / "alertmanager.log").read_text()[-2000:]
        raise AssertionError(f"alertmanager not ready in 30 s: {log}")
