"""`geadmin npu faults --fleet NAME`, the command itself, against a fleet of two real
tritonservers on two nodes (127.0.0.1 and 127.0.0.2, each a `[[server]]` of a servers file, so
each member's node is its host). Each runs npu_ge on the ACL test double
(tests/support/npu_fault_servers.py): `pair` on devices 0 and 1 under the ensemble `pipe`, and
`single` on device 1 on the first node, device 0 on the second. The double puts device 1 of each
in error at its first execution there ($NPU_GE_DOUBLE_DEVICE_ERROR, an HBM multi-bit ECC error),
and npu_ge counts it in npu_ge_device_errors_total: the fleet's fault source.

Nothing executed yet: exit 0. A request that reaches device 1 of the second node: exit 4, the
chip on its node takes one of `pair`'s two instances there. Then `single` on the first node
fails on its only device: exit 1, `single` is DOWN on that node (the second node's `single`,
on its own device 0, is untouched)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.stack.tritonserver import TritonProcess
from tests.support.http_doubles import closed_port
from tests.support.npu_fault_servers import start_fault_server
from tests.support.npu_ge import infer, metric_samples, wait_for

pytestmark = pytest.mark.integration

HBM_ECC = 507054  # ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR: RestartNPU in geadmin's grading of npu_ge's codes
NODE_A, NODE_B = "127.0.0.1", "127.0.0.2"
ECC = f"ACL {HBM_ECC} (RestartNPU, ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR)"  # code, level and meaning


@dataclass
class Fleet:
    a: TritonProcess  # single on device 1
    b: TritonProcess  # single on device 0
    servers_file: Path
    home: Path


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    root = tmp_path_factory.mktemp("npu_faults_fleet")
    knob = {"NPU_GE_DOUBLE_DEVICE_ERROR": f"1:{HBM_ECC}"}
    a = start_fault_server(root, "a", single_on="1", host=NODE_A, env=knob)
    try:
        b = start_fault_server(root, "b", single_on="0", host=NODE_B, env=knob)
        try:
            servers_file = root / "servers.toml"
            servers_file.write_text("".join(
                f'[[server]]\nname = "{name}"\nurl = "{s.http_url}"\nmetrics_url = "{s.metrics_url}"\n'
                f'repository = "{root / name / "repo"}"\n\n' for name, s in (("a", a), ("b", b)))
                + '[[fleet]]\nname = "two"\nsources = ["servers"]\n')
            yield Fleet(a, b, servers_file, root / "home")
        finally:
            b.stop()
    finally:
        a.stop()


def faults(fleet: Fleet, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(fleet.servers_file))
    for name in ("NPU_EXPORTER_URL", "NPU_FAULT_TABLE", "TRITON_METRICS_URL"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    code = main(["npu", "faults", "--fleet", "two", "--home", str(fleet.home), "--timeout", "10"])
    return code, capsys.readouterr().out


def fail_on_device_1(server: TritonProcess, model: str) -> None:
    """Requests one at a time until one reaches device 1 and fails there, then npu_ge's counter says so."""
    for i in range(60):
        x = np.full((1, 4), float(i), dtype=np.float32)
        try:
            infer(server.grpc_url, model, {"x": x})
        except InferenceServerException as exc:
            assert str(HBM_ECC) in str(exc), exc
            break
    else:
        raise AssertionError(f"60 requests to {model}: none reached device 1")
    wait_for(lambda: any(labels.get("device") == "1" and value >= 1 for labels, value
                         in metric_samples(server.metrics_url, "npu_ge_device_errors")), 10,
             "npu_ge's counter of the device error")


def test_the_fleet_command_exits_0_then_4_then_1_and_leads_with_the_chip_its_node_and_the_models(
        fleet: Fleet, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = faults(fleet, monkeypatch, capsys)
    assert code == ExitCode.OK, out
    assert out.splitlines()[0] == "OK: no NPU fault reported", out

    # a member whose faults cannot be read: never OK, the first line names it
    with_dead = fleet.servers_file.with_name("servers_with_dead.toml")
    with_dead.write_text(fleet.servers_file.read_text().replace(
        "[[fleet]]", f'[[server]]\nname = "c"\nurl = "http://127.0.0.1:{closed_port()}"\n\n[[fleet]]'))
    code, out = faults(replace(fleet, servers_file=with_dead), monkeypatch, capsys)
    assert code == ExitCode.DEGRADED, out
    assert out.splitlines()[0].startswith(
        "DEGRADED: NPU faults not read on 1 part(s) of the fleet, so a fault there is not ruled out — "
        "c (node "), out  # its node: the host of its URL

    fail_on_device_1(fleet.b, "pair")
    code, out = faults(fleet, monkeypatch, capsys)
    assert code == ExitCode.DEGRADED, out
    lines = out.splitlines()
    # two faults on the chip (the ACL error, and the instance npu_ge lost with it), its step named once
    assert lines[0] == f"ACTION: 2 NPU fault(s) need action — NPU 1 on node {NODE_B}: drain and reset", out
    assert lines[1] == (f"NPU 1 on node {NODE_B}: {ECC}"
                        " hits pair (1 of 2 instances) and the ensemble(s) pipe — drain and reset"), out
    assert (f"NPU 1 on node {NODE_B}: no code (unknown, instance pair_0_1 of pair lost its device (1x), chip "
            "unhealthy) hits pair") in out
    assert f"next: [drain] drain NPU 1 on node {NODE_B} of pair: device_ids 0 (without 1) through a " \
        f"rollout limited to node {NODE_B}" in out

    fail_on_device_1(fleet.a, "single")
    code, out = faults(fleet, monkeypatch, capsys)
    assert code == ExitCode.FAILED, out
    lines = out.splitlines()
    assert lines[0].startswith("DOWN: no healthy instance left of single (")
    assert lines[1] == (f"NPU 1 on node {NODE_A}: {ECC} hits pair (1 of 2 instances) and the ensemble(s) "
                        "pipe; single (1 of 1 instance, none left: DOWN) — give single another device first, "
                        "then drain and reset"), out
    assert any(line.startswith(f"NPU 1 on node {NODE_B}: ") and "single" not in line for line in lines), out
