"""`geadmin status` against a real tritonserver says whether a probe checked that its READY
models answer: with no sampler it stays OK (exit 0) and says they were not checked, and how to
turn the probes on; once the `geadmin sampler` that fix names has probed them, it says nothing
more."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.history import watch
from tests.support.processes import wait_for
from tests.support.samples import samples_triton
from tests.support.stack import GEADMIN, geadmin

pytestmark = pytest.mark.integration
MODEL = "text_normalize"
UNCHECKED = "not checked whether they answer requests"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    yield from samples_triton(tmp_path_factory.mktemp("probed"), models=[MODEL])


def status(server: TritonProcess, home: Path) -> tuple[int, dict[str, object]]:
    done = geadmin("status", "--url", server.http_url, "--repository", str(server.repository), "--json",
                   home=home)
    return done.returncode, json.loads(done.stdout)


def test_status_says_answers_were_not_checked_until_the_sampler_probes(
        server: TritonProcess, tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, document = status(server, home)
    headline = str(document["headline"])
    assert code == 0 and document["verdict"] == "OK", headline
    assert f"{UNCHECKED}: no synthetic probe of {server.http_url} is recorded" in headline, headline
    check = document["probe_check"]
    assert isinstance(check, dict) and check["checked"] is False
    fix = f"`geadmin sampler --url {server.http_url}`"
    assert fix in check["fix"] and fix in headline

    # the fix, as it says: the sampler beside this Triton, in the same workspace
    with (tmp_path / "sampler.log").open("wb") as log:
        sampler = subprocess.Popen([*GEADMIN, "sampler", "--url", server.http_url, "--metrics-url",
                                    server.metrics_url, "--interval", "1", "--probe-interval", "5"],
                                   env={**os.environ, "GEADMIN_HOME": str(home)}, stdout=log,
                                   stderr=subprocess.STDOUT)
        try:
            assert wait_for(lambda: MODEL in watch.latest_probes(server.http_url, home=home), 60), \
                (tmp_path / "sampler.log").read_text()
            code, document = status(server, home)
        finally:
            sampler.terminate()
            assert sampler.wait(timeout=15) == 0
    assert code == 0 and UNCHECKED not in str(document["headline"]), document["headline"]
    assert document["probe_check"]["checked"] is True  # type: ignore[index]


def test_a_probe_failure_recorded_under_the_http_url_pages_through_every_name_of_the_server(
        server: TritonProcess, tmp_path: Path) -> None:
    """The sampler records the HTTP URL it probes; `status` through the gRPC endpoint (the servers
    file names both) or through `localhost` is the same server, and its probe failure pages."""
    home = tmp_path / "home"
    now = time.time()
    watch.record_probes([watch.ProbeRecord(server.http_url, MODEL, now - 5, False, None, "boom")], home=home)
    servers = tmp_path / "servers.toml"
    servers.write_text(f'[[server]]\nname = "s"\nurl = "grpc://{server.grpc_url}"\n'
                       f'http_url = "{server.http_url}"\n')
    port = server.http_url.rsplit(":", 1)[1]
    env = {**os.environ, "GEADMIN_HOME": str(home), "GEADMIN_SERVERS_FILE": str(servers)}
    for where in (["--server", "s"], ["--url", f"http://localhost:{port}"]):
        done = subprocess.run([*GEADMIN, "status", *where, "--repository", str(server.repository)], env=env,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 4, (where, done.stdout, done.stderr)
        headline = done.stdout.splitlines()[0]
        assert headline.startswith(f"DEGRADED: model '{MODEL}' is READY but does not answer: boom"), headline
