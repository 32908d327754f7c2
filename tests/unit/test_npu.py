"""NPU telemetry: npu-smi text in every layout, npu-exporter's and npu_ge's metrics, which source
a host has, and `geadmin npu`.

Assets (tests/unit/assets/): `npu-smi/*_synth.txt` are the reference captures (layouts exact,
values invented; shared/reference/ascend); `*_variant.txt` are made here from them: an older
driver's narrower columns, extra and missing columns, a 910_93-style card with two chips and a
Phy-ID column, a single-chip 310P, and garbage. `telemetry/npu_exporter_synth.txt` uses the
exporter's family and label names (FACTS.md) with invented values;
`telemetry/metrics_2.51_npu_ge_acl_double.txt` was recorded from the real tritonserver with
the npu_ge backend on the ACL test double. The fake `npu-smi` below is a shell script in
tmp_path — a test double that prints those captures; it runs as a real subprocess.
"""

from __future__ import annotations

import io
import json
import os
import stat
import time
from contextlib import suppress
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geadmin.cli.main import main
from geadmin.errors import (
    MetricsParseError,
    MetricsUnreachableError,
    NpuSmiError,
    NpuSmiParseError,
    NpuSourceError,
)
from geadmin.telemetry.sources import npu_smi, npu_smi_details
from geadmin.telemetry.sources.detect import NpuSources, detect
from geadmin.telemetry.sources.npu import (
    NpuDevice,
    NpuPlacement,
    devices_from_exporter,
    devices_from_triton,
    with_models,
)
from geadmin.telemetry.sources.scrape import parse
from tests.support.http_doubles import closed_port, serve
from tests.support.hypothesis_profiles import examples

ASSETS = Path(__file__).parent / "assets"
SMI = ASSETS / "npu-smi"
MIB = 1 << 20
CALM = ("no Ascend NPU on this host: npu-smi not found, no npu-exporter configured, "
        "Triton publishes no npu_ge metrics")


def smi(name: str) -> str:
    return (SMI / name).read_text()


def by_id(devices: list[NpuDevice]) -> dict[int, NpuDevice]:
    return {d.id: d for d in devices}


# -- `npu-smi info` tables ---------------------------------------------------------------
def test_910b_table_gives_eight_devices_with_every_column() -> None:
    devices = npu_smi.parse(smi("npu-smi_info_910b_synth.txt"))
    assert [d.id for d in devices] == list(range(8))
    d0 = devices[0]
    assert (d0.npu_id, d0.chip_id, d0.chip_name, d0.health) == (0, 0, "910B3", "OK")
    assert d0.bus_id == "0000:C1:00.0"
    assert (d0.power_w, d0.temperature_c, d0.aicore_util_pct) == (90.1, 38.0, 0.0)
    assert (d0.hbm_used_bytes, d0.hbm_total_bytes) == (3380 * MIB, 65536 * MIB)
    assert (d0.memory_used_bytes, d0.memory_total_bytes) == (0, 0)  # the DDR column really says 0 / 0
    assert d0.device_memory == (3380 * MIB, 65536 * MIB)
    assert devices[7].power_w == 97.1 and devices[7].bus_id == "0000:42:00.0"
    assert d0.vector_util_pct is None and d0.cube_util_pct is None  # the table does not show them


def test_910b_process_table_says_who_holds_each_device() -> None:
    devices = by_id(npu_smi.parse(smi("npu-smi_info_910b_synth.txt")))
    (process,) = devices[0].processes or ()
    assert (process.pid, process.name, process.memory_bytes) == (12345, "tritonserver", 2100 * MIB)
    assert devices[1].processes == ()  # "No running processes found in NPU 1": known, none


def test_310p_duo_table_gives_two_chips_of_one_card_with_their_device_ids() -> None:
    devices = npu_smi.parse(smi("npu-smi_info_310p_duo_synth.txt"))
    assert [(d.id, d.npu_id, d.chip_id) for d in devices] == [(0, 1, 0), (1, 1, 1)]
    d0 = devices[0]
    assert d0.chip_name == "310P3" and d0.power_w is None  # 310P prints Power as NA: unknown, not 0
    assert (d0.memory_used_bytes, d0.memory_total_bytes) == (1839 * MIB, 21527 * MIB)
    assert d0.hbm_used_bytes is None and d0.hbm_total_bytes is None  # the 310P layout has no HBM column
    assert d0.device_memory == (1839 * MIB, 21527 * MIB)
    assert devices[1].temperature_c == 50.0 and devices[1].bus_id == "0000:02:00.0"
    assert all(d.processes == () for d in devices)


def test_narrower_columns_of_an_older_driver_parse_the_same_way() -> None:
    devices = npu_smi.parse(smi("npu-smi_info_910b_narrow_variant.txt"))
    assert [d.id for d in devices] == [0, 1]
    d0, d1 = devices
    assert (d0.aicore_util_pct, d0.hbm_used_bytes, d0.hbm_total_bytes) == (17.0, 30210 * MIB, 65536 * MIB)
    assert (d1.health, d1.hbm_used_bytes, d1.hbm_total_bytes) == ("Warning", 3380 * MIB, 65536 * MIB)
    assert [p.pid for p in d0.processes or ()] == [12345, 12400]
    assert d1.processes == ()


def test_extra_columns_are_ignored_and_missing_ones_stay_unknown() -> None:
    devices = npu_smi.parse(smi("npu-smi_info_910b_extra_missing_columns_variant.txt"))
    d0, d1 = devices
    assert (d0.chip_name, d0.power_w, d0.temperature_c, d0.aicore_util_pct) == ("910B4", 120.5, 51.0, 88.0)
    assert (d0.hbm_used_bytes, d0.hbm_total_bytes) == (12000 * MIB, 32768 * MIB)
    assert d0.bus_id == "0000:C1:00.0"
    assert d0.memory_used_bytes is None and d0.memory_total_bytes is None  # no Memory-Usage column
    assert d0.processes is None  # no process table: unknown
    assert d1.health == "Alarm"


def test_910_93_cards_with_two_chips_and_a_phy_id_column() -> None:
    devices = npu_smi.parse(smi("npu-smi_info_910_93_variant.txt"))
    assert [(d.id, d.npu_id, d.chip_id) for d in devices] == [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)]
    assert devices[1].power_w is None  # "-": the card's power is shown on its first chip only
    assert devices[2].aicore_util_pct == 55.0 and devices[2].hbm_used_bytes == 40960 * MIB
    assert [p.pid for p in devices[2].processes or ()] == [4242]
    assert devices[3].processes == () and devices[0].processes == ()


def test_single_chip_310p_with_critical_health() -> None:
    (device,) = npu_smi.parse(smi("npu-smi_info_310p_single_variant.txt"))
    assert (device.id, device.npu_id, device.chip_id, device.health) == (3, 3, 0, "Critical")
    assert device.aicore_util_pct == 42.0 and device.memory_used_bytes == 9000 * MIB


@pytest.mark.parametrize("text", [
    "",
    "\n\n",
    "dcmi module initialize failed. ret is -8005\n",
    "npu-smi: command not found",
    "+-----+\n| npu-smi 25.3.rc1 Version: 25.3.rc1 |\n+-----+\n",  # a header-less table
    "| NPU   Name | Health |\n+====+\n| x y | z |\n",  # a header but no device row
])
def test_text_that_is_not_an_npu_smi_table_is_a_typed_error(text: str) -> None:
    with pytest.raises(NpuSmiParseError):
        npu_smi.parse(text)


def test_garbage_file_is_a_parse_error_quoting_what_it_got() -> None:
    with pytest.raises(NpuSmiParseError, match="dcmi module initialize failed"):
        npu_smi.parse(smi("npu-smi_garbage.txt"))


# -- `npu-smi info watch` and `info -t ...` ---------------------------------------------------
def test_watch_capture_gives_the_latest_row_per_chip() -> None:
    text = smi("npu-smi_watch_910b_synth.txt")
    later = text + "0           0           95.5        41          63          0           2           5" \
                   "           0            0            7           \n"
    (device,) = npu_smi.parse(later)
    assert (device.id, device.power_w, device.temperature_c) == (0, 95.5, 41.0)
    assert (device.aicore_util_pct, device.cube_util_pct) == (63.0, 7.0)


def test_usages_give_vector_and_cube_per_chip() -> None:
    blocks = npu_smi_details.parse_details(smi("npu-smi_usages_910b_i0_synth.txt"))
    (chip,) = [b for b in blocks if "chip_id" in b]
    assert chip["vector_util_pct"] == 0.0 and chip["cube_util_pct"] == 0.0
    assert chip["hbm_total_bytes"] == 65536 * MIB
    blocks_310p = npu_smi_details.parse_details(smi("npu-smi_usages_310p_i1_synth.txt"))
    chips = [b for b in blocks_310p if "chip_id" in b]
    assert [c["chip_id"] for c in chips] == [0, 1]
    assert all("cube_util_pct" not in c and c["vector_util_pct"] == 0.0 for c in chips)  # 310P: Vectorcore


@pytest.mark.parametrize(("name", "expected"), [
    ("npu-smi_memory_910b_i0_c0_synth.txt", {"hbm_total_bytes": 65536 * MIB, "memory_total_bytes": 0}),
    ("npu-smi_memory_310p_i1_c0_synth.txt", {"memory_total_bytes": 21527 * MIB}),
    ("npu-smi_power_910b_i0_c0_synth.txt", {"power_w": 90.1}),
    ("npu-smi_temp_i0_c0_synth.txt", {"temperature_c": 39.0}),
    ("npu-smi_common_910b_i0_synth.txt", {"chip_id": 0, "aicore_util_pct": 0.0, "temperature_c": 39.0,
                                          "power_w": 90.1}),
])
def test_key_value_outputs_read_their_fields(name: str, expected: dict[str, object]) -> None:
    blocks = npu_smi_details.parse_details(smi(name))
    assert expected in blocks


def test_details_fill_what_the_table_lacks_and_keep_what_it_has() -> None:
    table = by_id(npu_smi.parse(smi("npu-smi_info_310p_duo_synth.txt")))
    usages = npu_smi_details.parse_details(smi("npu-smi_usages_310p_i1_synth.txt"))
    chip1 = npu_smi_details.with_details(table[1], usages)
    assert chip1.vector_util_pct == 0.0 and chip1.cube_util_pct is None
    assert chip1.memory_used_bytes == 1800 * MIB  # from the table, untouched
    power = npu_smi_details.parse_details(smi("npu-smi_power_910b_i0_c0_synth.txt"))  # `-c 0`: no chip id
    assert npu_smi_details.with_details(NpuDevice(id=0, source="npu-smi", chip_id=0), power).power_w == 90.1


def test_usages_output_alone_names_its_devices() -> None:
    devices = npu_smi.parse(smi("npu-smi_usages_310p_i1_synth.txt"))
    assert [(d.id, d.npu_id, d.chip_id, d.vector_util_pct) for d in devices] == [
        (0, 1, 0, 0.0), (1, 1, 1, 0.0)]
    with pytest.raises(NpuSmiParseError, match="NPU ID"):
        npu_smi.parse(smi("npu-smi_power_910b_i0_c0_synth.txt"))


# -- running npu-smi (a shell-script double in tmp_path, run for real) ----------------------
def fake_npu_smi(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "bin" / "npu-smi"
    script.parent.mkdir(exist_ok=True)
    script.write_text("#!/bin/sh\nPATH=/usr/bin:/bin\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def table_double(tmp_path: Path, table: str = "npu-smi_info_910b_synth.txt") -> Path:
    return fake_npu_smi(tmp_path, f'''case "$*" in
  "info") cat "{SMI / table}" ;;
  "info -t usages -i 0") cat "{SMI / 'npu-smi_usages_910b_i0_synth.txt'}" ;;
  *) echo "Usage: npu-smi info -t TYPE -i ID ($*)" >&2; exit 3 ;;
esac
''')


def test_read_devices_runs_info_and_usages_per_card(tmp_path: Path) -> None:
    devices = by_id(npu_smi.read_devices(str(table_double(tmp_path)), timeout_s=10))
    assert len(devices) == 8
    assert devices[0].cube_util_pct == 0.0 and devices[0].vector_util_pct == 0.0  # from -t usages -i 0
    assert devices[1].vector_util_pct is None  # usages for card 1 failed: unknown, the table stands
    assert devices[1].hbm_used_bytes == 3380 * MIB


def test_npu_smi_that_exits_with_an_error_says_what_it_printed(tmp_path: Path) -> None:
    script = fake_npu_smi(tmp_path, 'echo "dcmi module initialize failed. ret is -8005"\nexit 255\n')
    with pytest.raises(NpuSmiError, match=r"status 255: dcmi module initialize failed") as caught:
        npu_smi.run(str(script), ["info"])
    assert not isinstance(caught.value, NpuSmiParseError)


def test_npu_smi_that_hangs_is_stopped_with_its_children(tmp_path: Path) -> None:
    script = fake_npu_smi(tmp_path, "sleep 30\n")  # sh and its child sleep: the whole group goes
    started = time.monotonic()
    with pytest.raises(NpuSmiError, match="did not answer in time"):
        npu_smi.run(str(script), ["info"], timeout_s=0.5)
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(("make", "message"), [
    (lambda tmp: tmp / "missing" / "npu-smi", "is not installed there"),
    (lambda tmp: fake_npu_smi(tmp, "exit 0\n").parent, "may not be run"),  # a directory
    (lambda tmp: not_a_program(tmp), "could not be started"),  # ENOEXEC
])
def test_npu_smi_that_cannot_start_is_an_npu_smi_error(tmp_path: Path, make: object, message: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(NpuSmiError, match=message):
        npu_smi.run(str(path), ["info"])


def not_a_program(tmp_path: Path) -> Path:
    path = tmp_path / "npu-smi.bin"
    path.write_bytes(b"\x7fELF\x00garbage")
    path.chmod(0o755)
    return path


def test_npu_smi_not_executable_is_a_permission_error(tmp_path: Path) -> None:
    script = fake_npu_smi(tmp_path, "exit 0\n")
    script.chmod(0o600)
    if os.access(script, os.X_OK):  # root may run anything: then check the table instead
        assert any(t is PermissionError for t, _ in npu_smi.RUN_ERRORS)
        return
    with pytest.raises(NpuSmiError, match="may not be run"):
        npu_smi.run(str(script), ["info"])


def test_run_error_table_lists_subclasses_before_their_bases() -> None:
    types = [t for t, _ in npu_smi.RUN_ERRORS]
    assert types[-1] is OSError
    for i, earlier in enumerate(types):
        assert not any(issubclass(later, earlier) for later in types[i + 1:]), earlier


# -- npu-exporter and npu_ge on Triton ------------------------------------------------------
def exporter_page() -> str:
    return (ASSETS / "telemetry" / "npu_exporter_synth.txt").read_text()


def npu_ge_page() -> str:
    return (ASSETS / "telemetry" / "metrics_2.51_npu_ge_acl_double.txt").read_text()


def test_exporter_families_become_devices_with_units_converted() -> None:
    devices = by_id(devices_from_exporter(parse(exporter_page())))
    d0, d1 = devices[0], devices[1]
    assert d0.source == "npu-exporter" and d0.chip_name == "Ascend910B3"
    assert (d0.aicore_util_pct, d0.vector_util_pct, d0.cube_util_pct) == (37.0, 12.0, None)
    assert (d0.hbm_used_bytes, d0.hbm_total_bytes) == (30210 * MIB, 65536 * MIB)
    assert (d0.temperature_c, d0.power_w, d0.health) == (44.0, 161.5, "OK")
    assert [(p.pid, p.memory_bytes) for p in d0.processes or ()] == [(12345, 26800 * MIB)]
    assert d1.health == "Unhealthy" and d1.processes == () and d1.vector_util_pct is None


def test_a_page_without_exporter_families_is_a_source_error() -> None:
    with pytest.raises(NpuSourceError, match="npu_chip_info"):
        devices_from_exporter(parse((ASSETS / "telemetry" / "metrics_2.51_default.txt").read_text(),
                                    url="http://h:8082/metrics"))


def test_npu_ge_metrics_of_the_real_server_give_devices_and_the_model_map() -> None:
    devices = by_id(devices_from_triton(parse(npu_ge_page())))
    assert sorted(devices) == [0, 1]
    assert devices[0].models == (NpuPlacement("pair", "1", "pair_0_0"),)
    assert devices[1].models == (NpuPlacement("pair", "1", "pair_0_1"),
                                 NpuPlacement("single", "1", "single_0_0"))
    assert devices[1].hbm_used_bytes == 2149581328 and devices[1].hbm_total_bytes == 34359738368
    assert devices[0].aicore_util_pct == 40.0
    assert devices[0].temperature_c is None  # npu_ge publishes no temperature: unknown


def test_triton_without_npu_ge_publishes_no_devices() -> None:
    assert devices_from_triton(parse((ASSETS / "telemetry" / "metrics_2.51_default.txt").read_text())) == []


def test_placements_are_added_to_the_devices_of_another_source() -> None:
    table = npu_smi.parse(smi("npu-smi_info_910b_synth.txt"))
    mapped = by_id(with_models(table, parse(npu_ge_page())))
    assert [p.model for p in mapped[1].models or ()] == ["pair", "single"]
    assert mapped[5].models == ()  # npu_ge runs nothing there
    untouched = with_models(table, parse((ASSETS / "telemetry" / "metrics_2.51_default.txt").read_text()))
    assert all(d.models is None for d in untouched)  # no npu_ge: unknown, not "nothing"


# -- which source a host has -----------------------------------------------------------------
def no_npu_smi(name: str) -> None:
    return None


def test_a_host_without_any_source_gets_one_calm_line() -> None:
    with serve((ASSETS / "telemetry" / "metrics_2.51_default.txt").read_bytes()) as url:
        report = detect(NpuSources(triton_metrics_url=url), which=no_npu_smi)
    assert report.devices == () and report.source == ""
    assert report.summary == CALM


def test_a_triton_that_does_not_answer_at_a_default_address_is_only_a_note() -> None:
    url = f"http://127.0.0.1:{closed_port()}/metrics"
    report = detect(NpuSources(triton_metrics_url=url, triton_metrics_explicit=False), which=no_npu_smi)
    assert report.devices == ()
    assert report.summary.endswith(f"Triton's metrics at {url} did not answer")


def test_a_triton_url_given_explicitly_that_does_not_answer_is_an_error() -> None:
    url = f"http://127.0.0.1:{closed_port()}/metrics"
    with pytest.raises(MetricsUnreachableError):
        detect(NpuSources(triton_metrics_url=url, triton_metrics_explicit=True), which=no_npu_smi)


def test_a_triton_url_that_answers_garbage_is_an_error_not_a_crash() -> None:
    with serve(b"<html>sign in</html>") as url, pytest.raises(MetricsParseError, match="sign in"):
        detect(NpuSources(triton_metrics_url=url), which=no_npu_smi)


def test_several_failing_sources_are_all_named_in_one_error(tmp_path: Path) -> None:
    script = fake_npu_smi(tmp_path, 'echo "dcmi module initialize failed. ret is -8005"\nexit 1\n')
    down = f"http://127.0.0.1:{closed_port()}/metrics"
    with pytest.raises(MetricsUnreachableError) as caught:
        detect(NpuSources(exporter_url=down), which=lambda name: str(script))
    assert down in str(caught.value) and "dcmi module initialize failed" in str(caught.value)


def test_the_exporter_comes_first_and_gets_the_npu_ge_model_map() -> None:
    with serve(exporter_page().encode()) as exporter, serve(npu_ge_page().encode()) as triton:
        report = detect(NpuSources(exporter_url=exporter, triton_metrics_url=triton),
                        which=lambda name: "/should/not/run")
    assert report.source == "npu-exporter" and report.summary == "2 NPUs (npu-exporter)"
    assert [p.instance for p in by_id(list(report.devices))[0].models or ()] == ["pair_0_0"]


def test_npu_smi_answers_when_no_exporter_is_configured(tmp_path: Path) -> None:
    script = table_double(tmp_path)
    report = detect(NpuSources(), which=lambda name: str(script))
    assert report.source == "npu-smi" and len(report.devices) == 8 and report.notes == ()


def test_a_configured_exporter_that_is_down_is_noted_when_npu_smi_answers(tmp_path: Path) -> None:
    script = table_double(tmp_path)
    down = f"http://127.0.0.1:{closed_port()}/metrics"
    report = detect(NpuSources(exporter_url=down), which=lambda name: str(script))
    assert report.source == "npu-smi"
    (note,) = report.notes
    assert down in note


def test_a_configured_exporter_that_is_down_with_nothing_else_is_an_error() -> None:
    down = f"http://127.0.0.1:{closed_port()}/metrics"
    with pytest.raises(MetricsUnreachableError, match="refused"):
        detect(NpuSources(exporter_url=down), which=no_npu_smi)


def test_triton_npu_ge_metrics_are_the_last_source() -> None:
    with serve(npu_ge_page().encode()) as triton:
        report = detect(NpuSources(triton_metrics_url=triton), which=no_npu_smi)
    assert report.source == "triton" and [d.id for d in report.devices] == [0, 1]


def test_failing_npu_smi_with_nothing_else_is_its_error(tmp_path: Path) -> None:
    script = fake_npu_smi(tmp_path, 'echo "dcmi module initialize failed. ret is -8005"\nexit 1\n')
    with pytest.raises(NpuSmiError, match="dcmi"):
        detect(NpuSources(), which=lambda name: str(script))


# -- `geadmin npu` ---------------------------------------------------------------------------
@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No stack, no configured sources, and a PATH without npu-smi."""
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    for name in ("GEADMIN_NPU_EXPORTER_URL", "GEADMIN_TRITON_METRICS_URL", "GEADMIN_METRICS_PORT"):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "empty_path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return empty


def test_cli_on_a_host_without_npus_prints_the_calm_line_and_exits_0(
        clean_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with serve((ASSETS / "telemetry" / "metrics_2.51_default.txt").read_bytes()) as url:
        assert main(["npu", "--metrics-url", url]) == 0
    assert capsys.readouterr().out.strip() == CALM


def test_cli_shows_npu_smi_devices_from_path(clean_env: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = table_double(tmp_path)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{clean_env}")
    with serve(npu_ge_page().encode()) as url:
        assert main(["npu", "--metrics-url", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "8 NPUs (npu-smi)"
    assert lines[1].split()[:3] == ["ID", "NPU/CHIP", "NAME"]
    assert "pair:1 (pair_0_1), single:1 (single_0_0)" in lines[3]  # device 1: the model map
    assert "3.3 / 64.0" in lines[2]


def test_cli_json_of_a_saved_npu_smi_output(clean_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["npu", "--json", "--npu-smi-file", str(SMI / "npu-smi_info_310p_duo_synth.txt")]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["source"] == "npu-smi" and len(document["devices"]) == 2
    assert document["devices"][0]["power_w"] is None  # unknown is null, never 0
    assert document["devices"][1]["memory_total_bytes"] == 21527 * MIB


def test_cli_reads_a_pasted_output_from_stdin(clean_env: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(smi("npu-smi_info_910_93_variant.txt")))
    assert main(["npu", "--npu-smi-file", "-"]) == 0
    assert capsys.readouterr().out.startswith("4 NPUs (npu-smi output in stdin)")


def test_cli_exits_1_on_a_source_error(clean_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["npu", "--npu-smi-file", str(SMI / "npu-smi_garbage.txt")]) == 1
    assert "dcmi module initialize failed" in capsys.readouterr().err
    down = f"http://127.0.0.1:{closed_port()}/metrics"
    assert main(["npu", "--exporter-url", down, "--metrics-url", down, "--timeout", "2"]) == 1


def test_cli_missing_file_is_a_usage_error(clean_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["npu", "--npu-smi-file", str(clean_env / "nope.txt")]) == 2
    assert "cannot read --npu-smi-file" in capsys.readouterr().err


# -- property: npu-smi parsers raise only their typed errors ----------------------------------
TABLE_LINES = [line for name in ("npu-smi_info_910b_synth.txt", "npu-smi_info_310p_duo_synth.txt",
                                 "npu-smi_usages_910b_i0_synth.txt", "npu-smi_watch_910b_synth.txt")
               for line in smi(name).splitlines()]
NOISE = st.text(alphabet="|+-=/ :0123456789NAOK\tx\n", max_size=4)


def _parse_or_typed_error(text: str) -> None:
    for reader in (npu_smi.parse, npu_smi_details.parse_details):
        try:
            result = reader(text)
        except NpuSmiParseError as exc:
            assert str(exc)
            continue
        assert isinstance(result, list)


@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_npu_smi_parsers_on_arbitrary_text_raise_only_parse_errors(text: str) -> None:
    _parse_or_typed_error(text)


@settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(TABLE_LINES), st.integers(0, 120), NOISE), max_size=40))
def test_npu_smi_parsers_on_mangled_captures_raise_only_parse_errors(
        edits: list[tuple[str, int, str]]) -> None:
    _parse_or_typed_error("\n".join(line[:cut] + noise + line[cut:] for line, cut, noise in edits))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(exporter_page().splitlines() + npu_ge_page().splitlines()),
                          st.integers(0, 200), st.text(max_size=3)), max_size=30))
def test_metrics_npu_sources_on_mangled_pages_raise_only_typed_errors(
        edits: list[tuple[str, int, str]]) -> None:
    text = "\n".join(line[:cut] + noise + line[cut:] for line, cut, noise in edits)
    try:
        page = parse(text)
    except MetricsParseError:
        return
    devices_from_triton(page)
    with suppress(NpuSourceError):
        devices_from_exporter(page)
