"""Config skew against real tritonservers on loopback: `a` (127.0.0.1) and `b` (127.0.0.2), each
with its own repository holding `echo` (max_batch_size 8, one instance), and `r` (127.0.0.3) whose
model-config API needs an admin key geadmin is not given (`--http-restricted-api=model-config`).

The same version served with different configs (a hand edit and reload on b: max_batch_size 4,
two instances) read as "the same everywhere": `fleet status --configs` and the Fleet page's
"Compare configs" now name the server and the fields, DEGRADED (exit 4); without them the
headline claims only state and version. r's config is never counted as the same."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.fleet.config_skew import NEEDS_KEY, normalized
from geadmin.fleet.discovery import discover, fleet_named
from geadmin.fleet.polling import poll
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.apptest import APP, isolate, run
from tests.support.processes import TEST_EXIT_TIMEOUT_S, triton_ports_free_on, wait_for
from tests.support.stack import in_process

pytestmark = pytest.mark.integration

MODEL = "echo"
HOSTS = {"a": "127.0.0.1", "b": "127.0.0.2", "r": "127.0.0.3"}
KEY = "config-s3cret"
MODEL_PY = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy() * 2)]) for r in requests]
'''


def config(batch: int = 8, count: int = 1) -> str:
    return (f'name: "{MODEL}"\nbackend: "python"\nmax_batch_size: {batch}\n'
            'input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n'
            'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\n'
            f'instance_group [{{ count: {count} kind: KIND_CPU }}]\n')


@dataclass
class Lab:
    servers: dict[str, TritonProcess]
    home: Path

    def client(self, name: str) -> TritonClient:
        return TritonClient(self.servers[name].http_url, admin_key=KEY, timeout_s=30, load_timeout_s=60)

    def serve(self, name: str, text: str) -> None:
        """`text` written to `name`'s repository and loaded there, as a hand edit and reload are."""
        (self.servers[name].repository / MODEL / "config.pbtxt").write_text(text)
        with self.client(name) as client:
            client.load(MODEL)
            batch = int(text.split("max_batch_size: ")[1].split("\n")[0])
            # the reload runs beside the serving version: only the live config says it is in (FACTS.md)
            assert wait_for(lambda: client.model_config(MODEL).max_batch_size == batch, 60)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("config_skew")
    ports = triton_ports_free_on(*HOSTS.values())
    servers: dict[str, TritonProcess] = {}
    restricted = [f"--http-restricted-api=model-config:admin-key={KEY}",
                  f"--grpc-restricted-protocol=model-config:admin-key={KEY}"]
    try:
        for name, host in HOSTS.items():
            repo = root / f"repo-{name}"
            (repo / MODEL / "1").mkdir(parents=True)
            (repo / MODEL / "config.pbtxt").write_text(config())
            (repo / MODEL / "1" / "model.py").write_text(MODEL_PY)
            servers[name] = TritonProcess(repo, host=host, ports=ports, models=[MODEL],
                                          extra_args=restricted if name == "r" else (),
                                          log_path=root / f"{name}.log", exit_timeout_s=TEST_EXIT_TIMEOUT_S)
            servers[name].start()
        servers_file = root / "servers.toml"
        servers_file.write_text("".join(
            f'[[server]]\nname = "{n}"\nurl = "{s.http_url}"\nmetrics_url = "{s.metrics_url}"\n\n'
            for n, s in servers.items()))
        with pytest.MonkeyPatch.context() as env:  # the default fleet: the configured servers
            env.setenv("GEADMIN_SERVERS_FILE", str(servers_file))
            env.delenv("GEADMIN_FLEET", raising=False)
            yield Lab(servers, root / "home")
    finally:
        for server in servers.values():
            server.stop()


def fleet_status(lab: Lab, *args: str) -> tuple[int, str]:
    """`geadmin fleet status` of the default fleet: the configured servers, trusted, no key."""
    result = in_process("fleet", "status", *args, home=lab.home)
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, result.stdout


@pytest.fixture
def a_and_b(lab: Lab, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Lab]:
    """The fleet of a and b only, each serving the file it started with at the end."""
    file = tmp_path / "servers.toml"
    file.write_text("".join(f'[[server]]\nname = "{n}"\nurl = "{lab.servers[n].http_url}"\n'
                            f'metrics_url = "{lab.servers[n].metrics_url}"\n\n' for n in ("a", "b")))
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(file))
    yield lab
    lab.serve("b", config())


def test_two_servers_loading_the_same_file_serve_the_same_config_field_for_field(a_and_b: Lab) -> None:
    """Nothing in Triton's served config varies by server (checked here, not assumed): no field is
    left out of the comparison (geadmin.fleet.config_skew)."""
    with a_and_b.client("a") as a, a_and_b.client("b") as b:
        assert normalized(a.model_config(MODEL)) == normalized(b.model_config(MODEL))
    status = poll(discover(fleet_named(None)), configs=True)
    assert status.config_skew() == [] and status.configs_not_compared() == []
    assert status.headline() == "FLEET OK: 2 servers, 1 model, the same everywhere"


def test_a_hand_edit_on_one_server_is_config_skew_naming_the_server_and_the_fields(a_and_b: Lab) -> None:
    a_and_b.serve("b", config(batch=4, count=2))
    code, text = fleet_status(a_and_b)
    first = text.splitlines()[0]
    assert code == 0 and first == ("FLEET OK: 2 servers, 1 model, the same state and version everywhere "
                                   "(configs not compared)"), text  # it said "the same everywhere"
    code, text = fleet_status(a_and_b, "--configs")
    skew = ("echo: config differs on 1 of 2 — b: max_batch_size 4 (8 on a); "
            "instance_group[0].count 2 (1 on a)")
    assert code == 4, text
    assert text.splitlines()[0] == ("FLEET DEGRADED: 2 of 2 servers serving; 0 model(s) failed, 1 skewed — "
                                    f"first: {skew}")
    assert f"CONFIG SKEW (1):\n  {skew}" in text and "READY v1, config differs" in text
    code, text = fleet_status(a_and_b, "--configs", "--json")
    document = json.loads(text)
    assert code == 4 and document["config_skew"] == [skew] and document["skew"] == []
    assert document["matrix"][MODEL] == {"a": {"state": "READY", "version": "1", "config": "same"},
                                         "b": {"state": "READY", "version": "1", "config": "differs"}}


def test_a_config_api_that_needs_the_key_geadmin_lacks_is_not_compared_never_the_same(lab: Lab) -> None:
    lab.serve("r", config(batch=2))  # r serves another config: unseen, it must not read as the same
    try:
        code, text = fleet_status(lab, "--configs", "--json")  # a, b and r: r's config needs the key
        document = json.loads(text)
        why = f"{NEEDS_KEY} — give geadmin its key (admin_key_file in the servers file)"
        assert document["configs_not_compared"] == [f"config not compared on r: {why}"], document
        assert document["headline"] == f"FLEET OK, with warnings: config not compared on r: {why}"
        assert document["matrix"][MODEL]["r"]["config"] == "not read" and code == 0
        assert document["matrix"][MODEL]["a"]["config"] == "same"  # compared with b's
        assert document["configs_compared"] == "partial"  # r's was not
    finally:
        lab.serve("r", config())


def test_the_fleet_page_compares_configs_when_asked(a_and_b: Lab, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    servers_file = os.environ["GEADMIN_SERVERS_FILE"]
    isolate(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", servers_file)
    a_and_b.serve("b", config(batch=4, count=2))
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("fleet.py")
    run(at)
    assert at.success and at.success[0].value.endswith("(configs not compared)"), [e.value for e in at.error]
    next(t for t in at.toggle if t.label == "Compare configs").set_value(True)
    run(at)
    assert at.error and at.error[0].value.startswith(
        "FLEET DEGRADED: 2 of 2 servers serving; 0 model(s) failed, 1 skewed — first: echo: config differs "
        "on 1 of 2")
    matrix = at.dataframe[0].value
    assert (matrix.loc[MODEL, "a"], matrix.loc[MODEL, "b"]) == ("READY v1", "READY v1, config differs")
