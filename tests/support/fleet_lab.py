"""A fleet lab: three real tritonservers on 127.0.0.1, .2 and .3 (the same ports, as replicas on
three hosts), `a` and `b` reading one repository (a shared volume), `c` its own, named fleet
`lab` in a servers file. Each repository holds `echo`, a python model whose config parameter
`mode` the tests change and read back from Triton (`mode_served`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from geadmin.fleet.discovery import discover, fleet_named
from geadmin.fleet.members import Member
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.processes import TEST_EXIT_TIMEOUT_S, triton_ports_free_on
from tests.support.stack import exported

MODEL = "echo"
HOSTS = {"a": "127.0.0.1", "b": "127.0.0.2", "c": "127.0.0.3"}

MODEL_PY = '''import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy() * 2)]) for r in requests]
'''


def config(mode: str) -> str:
    return (f'name: "{MODEL}"\nbackend: "python"\nmax_batch_size: 0\n'
            'input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n'
            'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\n'
            f'parameters {{ key: "mode" value {{ string_value: "{mode}" }} }}\n')


BASE = config("v1")


def make_repository(root: Path) -> Path:
    (root / MODEL / "1").mkdir(parents=True)
    (root / MODEL / "config.pbtxt").write_text(BASE)
    (root / MODEL / "1" / "model.py").write_text(MODEL_PY)
    return root


@dataclass
class FleetLab:
    servers: dict[str, TritonProcess]
    shared: Path  # a's and b's
    own: Path  # c's
    servers_file: Path

    def client(self, name: str) -> TritonClient:
        return TritonClient(self.servers[name].http_url, timeout_s=30, load_timeout_s=60)

    def members(self) -> list[Member]:
        return list(discover(fleet_named("lab")).members)

    def mode_served(self, name: str) -> str:
        with self.client(name) as client:
            return client.model_config(MODEL).parameters["mode"].string_value

    def files(self) -> tuple[bytes, bytes]:
        return ((self.shared / MODEL / "config.pbtxt").read_bytes(),
                (self.own / MODEL / "config.pbtxt").read_bytes())

    def put_back(self) -> None:
        for repo in (self.shared, self.own):
            (repo / MODEL / "config.pbtxt").write_text(BASE)
        for name in self.servers:
            with self.client(name) as client:
                client.load(MODEL)


@contextlib.contextmanager
def fleet_lab(root: Path, *, export: bool = False, homes: bool = False) -> Iterator[FleetLab]:
    """The lab, started; stopped when the block ends. `export`: GEADMIN_SERVERS_FILE is its
    `servers_file` for the block, for `fleet_named("lab")` to find it (else set it yourself).
    `homes`: each [[server]] names its workspace, `root / "home-<name>"`."""
    shared, own = make_repository(root / "shared"), make_repository(root / "own")
    ports = triton_ports_free_on(*HOSTS.values())
    servers: dict[str, TritonProcess] = {}
    try:
        for name, host in HOSTS.items():
            servers[name] = TritonProcess(own if name == "c" else shared, host=host, ports=ports,
                                          models=[MODEL], log_path=root / f"{name}.log",
                                          exit_timeout_s=TEST_EXIT_TIMEOUT_S)
            servers[name].start()
        servers_file = root / "servers.toml"
        servers_file.write_text("".join(
            f'[[server]]\nname = "{n}"\n' + (f'home = "{root / f"home-{n}"}"\n' if homes else "")
            + f'url = "{s.http_url}"\nmetrics_url = "{s.metrics_url}"\n'
            f'repository = "{own if n == "c" else shared}"\n\n' for n, s in servers.items())
            + '[[fleet]]\nname = "lab"\nsources = ["servers"]\n')
        lab = FleetLab(servers, shared, own, servers_file)
        with exported("GEADMIN_SERVERS_FILE", str(servers_file)) if export else contextlib.nullcontext():
            yield lab
    finally:
        for server in servers.values():
            server.stop()
