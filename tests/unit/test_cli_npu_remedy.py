"""`geadmin npu remedy`: the dry run by default, the chip's faults in the first lines, and the exit
codes. The fault report is built by hand and handed to the command in place of the readers
(`report_double`: the readers and the impact are tested in their own modules); the dry run reads
the real repository and contacts no server (the address below answers nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.diagnose.npu_faults import FaultReport, ModelHit
from geadmin.ops.npu import wiring
from geadmin.telemetry.sources.fault_table import FaultLevel
from tests.support.fault_reports import HBM_ECC, drain_plan, impact, report

NOWHERE = "http://127.0.0.1:9"
CONFIG = ('name: "resnet"\nbackend: "python"\nmax_batch_size: 0\n'
          'parameters { key: "device_ids" value { string_value: "0,1" } }\n')


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    repo = tmp_path / "repo"
    (repo / "resnet" / "1").mkdir(parents=True)
    (repo / "resnet" / "config.pbtxt").write_text(CONFIG)
    return repo


def hand(monkeypatch: pytest.MonkeyPatch, faults: FaultReport) -> None:
    def report_double(sources: wiring.HostFaultSources, *, home: Path | None = None) -> FaultReport:
        return faults

    monkeypatch.setattr(wiring, "current_report", report_double)


FAULTED = report(impact(0, HBM_ECC, FaultLevel.RESTART_NPU, hits=[ModelHit("resnet", 2, 1, ("pipeline",))],
                        plan=drain_plan("resnet", 0)),
                 notes=["npu-smi not on PATH"])


def test_the_dry_run_names_the_fault_and_the_models_first_and_changes_nothing(
        repository: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    hand(monkeypatch, FAULTED)
    code = main(["npu", "remedy", "--chip", "0", "--url", NOWHERE, "--repository", str(repository)])
    out = capsys.readouterr().out.splitlines()
    assert code == ExitCode.OK
    assert out[:3] == ["note: npu-smi not on PATH",
                       "chip 0: code 0x80E01801, level RestartNPU: meaning of RestartNPU",
                       "  resnet: 1/2 instances lost (ensembles: pipeline)"]
    assert "[would] drain: would apply 'resnet'" in out[3] and "'0,1' -> '1'" in out[3]
    assert out[4] == "  [say] reset: reset chip 0; run it yourself: npu-smi set -t reset -i 0 -c 0"
    assert out[-1].startswith("dry run: nothing was changed")
    assert (repository / "resnet" / "config.pbtxt").read_text() == CONFIG


def test_json_says_the_same(repository: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    hand(monkeypatch, FAULTED)
    assert main(["npu", "remedy", "--chip", "0", "--url", NOWHERE, "--repository", str(repository),
                 "--json"]) == ExitCode.OK
    document = json.loads(capsys.readouterr().out)
    (fault,) = document["faults"]
    assert (fault["code"], fault["level"], document["applied"]) == ("0x80E01801", "RestartNPU", False)
    assert [s["state"] for s in fault["steps"]] == ["would", "said"]


def test_a_chip_without_a_fault_or_another_node_s_chip_exits_1(
        repository: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    hand(monkeypatch, FAULTED)
    assert main(["npu", "remedy", "--chip", "3", "--url", NOWHERE]) == ExitCode.FAILED
    assert "no fault present on chip 3" in capsys.readouterr().out
    assert main(["npu", "remedy", "--chip", "0", "--node", "node-b", "--url", NOWHERE]) == ExitCode.FAILED
    assert "no fault present on chip 0 of node node-b" in capsys.readouterr().out


def test_a_drain_that_cannot_be_done_is_refused_with_its_reason_and_exits_1(
        repository: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    hand(monkeypatch, report(impact(5, HBM_ECC, FaultLevel.RESTART_NPU, plan=drain_plan("resnet", 5))))
    assert main(["npu", "remedy", "--chip", "5", "--url", NOWHERE, "--repository", str(repository)]) \
        == ExitCode.FAILED
    assert "[REFUSED] drain: 'resnet''s device_ids '0,1' does not name chip 5" in capsys.readouterr().out


def test_a_negative_chip_is_bad_usage(repository: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["npu", "remedy", "--chip", "-1", "--url", NOWHERE]) == ExitCode.USAGE
    assert "a chip is a device id" in capsys.readouterr().err


def test_geadmin_npu_alone_still_lists_the_npus(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    saved = tmp_path / "npu-smi.txt"
    saved.write_text("no npu-smi table here\n")
    assert main(["npu", "--npu-smi-file", str(saved)]) == ExitCode.FAILED  # `npu` ran, not `remedy`
    assert "not npu-smi output" in capsys.readouterr().err
