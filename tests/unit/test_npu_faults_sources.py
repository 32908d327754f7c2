"""Reading NPU faults: npu-exporter pages, npu-smi text, npu_ge's device errors, every source.

Assets (tests/unit/assets/npu-faults/, values invented, layouts those of the real tools):
`exporter_*_synth.txt` are npu-exporter pages in the format of MindCluster's npu-exporter
(v7.3.2: `npu_chip_info_error_code`, `_1`..`_9`, `health_status` 1/0/-1, `link_status` 1 UP /
0 DOWN, `network_status`); `npu-smi_*_synth.txt` follow the npu-smi captures of
/work/shared/reference/ascend and the driver's documentation of `npu-smi info -t health`;
`triton_npu_ge_device_errors_synth.txt` is a Triton page with npu_ge's device-error counters
(the names the backend publishes). The npu-smi on PATH is a shell-script double in tmp_path
(it prints those captures) run as a real subprocess; the exporter and Triton pages are served
by a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from geadmin.errors import MetricsUnreachableError, NpuSmiError, NpuSmiParseError, NpuSourceError
from geadmin.telemetry.sources.detect import NpuSources
from geadmin.telemetry.sources.fault_reading import read_faults
from geadmin.telemetry.sources.npu_faults import (
    MAX_FAULTS,
    SOURCE_EXPORTER,
    SOURCE_NPU_GE,
    SOURCE_NPU_SMI,
    ChipFault,
    faults_from_exporter,
    faults_from_npu_smi,
    faults_from_triton,
)
from geadmin.telemetry.sources.scrape import parse
from tests.support.http_doubles import closed_port, serve

ASSETS = Path(__file__).parent / "assets"
FAULTS = ASSETS / "npu-faults"
REFERENCE = ASSETS / "npu-smi"  # copies of shared/reference/ascend/npu-smi


def page(name: str):  # type: ignore[no-untyped-def]
    return parse((FAULTS / name).read_text())


def shown(faults: list[ChipFault]) -> list[tuple[int, str, bool | None]]:
    return [(f.chip, f.code_hex, f.healthy) for f in faults]


# -- npu-exporter ----------------------------------------------------------------------------
def test_one_code_on_an_unhealthy_chip() -> None:
    faults = faults_from_exporter(page("exporter_one_code_synth.txt"), node="node-7")
    assert shown(faults) == [(1, "0x80E18005", False)]
    assert faults[0].source == SOURCE_EXPORTER and faults[0].node == "node-7"
    assert "unhealthy" in faults[0].detail


def test_several_codes_on_one_chip_from_the_numbered_series_each_once() -> None:
    faults = faults_from_exporter(page("exporter_several_codes_synth.txt"))
    assert shown(faults) == [(2, "0x80E21007", True), (2, "0x80CB8002", True), (2, "0x81AB800D", True)]


def test_an_unknown_code_and_an_unhealthy_chip_without_a_code_are_never_dropped() -> None:
    faults = faults_from_exporter(page("exporter_unknown_unhealthy_synth.txt"))
    assert shown(faults) == [(0, "none", False), (1, "none", True), (3, "0x8F00ABCD", False)]
    link = faults[1]
    assert link.code is None and "link DOWN" in link.detail and "network unhealthy" in link.detail


def test_a_chip_without_codes_and_healthy_is_no_fault() -> None:
    assert faults_from_exporter(page("exporter_cleared_after_synth.txt")) == []


def test_garbage_values_are_left_out_with_a_note_and_the_good_ones_kept() -> None:
    notes: list[str] = []
    faults = faults_from_exporter(page("exporter_garbage_synth.txt"), notes=notes)
    assert shown(faults) == [(5, "0x80E21007", None)]  # health 7 is no status: not said
    text = "\n".join(notes)
    for bad in ("nan", "-5.0", "10000000000.0", "3.5", "inf", "'abc'", "'99999999999'", "= 7.0"):
        assert bad in text, bad


def test_a_huge_page_is_cut_with_a_note() -> None:
    lines = ["# TYPE npu_chip_info_error_code gauge"]
    lines += [f'npu_chip_info_error_code{{id="{i}"}} {0x80E21007}' for i in range(MAX_FAULTS + 500)]
    notes: list[str] = []
    faults = faults_from_exporter(parse("\n".join(lines) + "\n"), notes=notes)
    assert len(faults) == MAX_FAULTS
    assert any(f"only the first {MAX_FAULTS}" in n for n in notes)


def test_many_bad_values_make_a_bounded_list_of_notes() -> None:
    lines = ["# TYPE npu_chip_info_error_code gauge"]
    lines += [f'npu_chip_info_error_code{{id="{i}"}} -1' for i in range(500)]
    notes: list[str] = []
    faults_from_exporter(parse("\n".join(lines) + "\n"), notes=notes)
    assert len(notes) == 21 and notes[-1] == "... and 480 more values left out"


# -- npu_ge on Triton's /metrics -------------------------------------------------------------
def test_npu_ge_device_errors_and_lost_devices() -> None:
    notes: list[str] = []
    faults = faults_from_triton(page("triton_npu_ge_device_errors_synth.txt"), node="n1", notes=notes)
    assert shown(faults) == [(1, "ACL 507054", None), (1, "none", False)]
    assert faults[0].source == SOURCE_NPU_GE and faults[0].count == 3
    assert faults[0].detail == "3 failed executes with ACL error 507054 since Triton started"
    assert faults[1].count is None  # a lost device: there while its broken instance is
    assert "pair_0_1 of pair" in faults[1].detail  # the lost instance, its device from instance_device
    assert any("'not-a-code'" in n for n in notes) and any("'gone_0_0'" in n for n in notes)


def test_a_triton_without_npu_ge_reports_no_faults() -> None:
    assert faults_from_triton(parse((ASSETS / "telemetry" / "metrics_2.51_default.txt").read_text())) == []


# -- npu-smi text ----------------------------------------------------------------------------
def smi(name: str) -> str:
    return (FAULTS / name).read_text()


def test_the_info_table_health_column_makes_faults_without_codes() -> None:
    faults = faults_from_npu_smi(smi("npu-smi_info_910b_alarm_synth.txt"))
    assert shown(faults) == [(3, "none", False), (5, "none", False), (6, "none", True)]
    assert {f.source for f in faults} == {SOURCE_NPU_SMI}
    assert faults[0].detail == "Health Alarm"


TABLE_910B = "npu-smi_info_910b_alarm_synth.txt"


def test_health_output_gives_hex_codes_for_the_chips_its_command_lines_name() -> None:
    text = smi(TABLE_910B) + "\n" + smi("npu-smi_health_session_synth.txt")
    faults = [f for f in faults_from_npu_smi(text, node="node-7") if f.code is not None]
    assert shown(faults) == [(3, "0x80E18005", False), (5, "0x80E21007", False), (5, "0x8F00ABCD", False)]
    assert "HBMC Ca Parity Error" in faults[0].detail and faults[0].node == "node-7"


def test_health_output_with_npu_id_lines_and_a_bad_code_noted() -> None:
    notes: list[str] = []
    faults = faults_from_npu_smi(smi(TABLE_910B) + "\n" + smi("npu-smi_health_ids_synth.txt"), notes=notes)
    assert (1, "0x80E21007", True) in shown(faults)  # Warning: a chip that still serves
    assert any("'zz-not-hex'" in n for n in notes)


def test_health_blocks_without_the_table_name_no_device_rather_than_a_guessed_one() -> None:
    """Only the `npu-smi info` table says which device a chip is: a capture of the second chip of
    a card (or of chip 0 of a 310P Duo's NPU 1, device 0) was mapped by NPU ID or position, and
    `npu remedy --apply` would have drained a healthy chip."""
    second_chip = "# npu-smi info -t health -i 0 -c 1\nHealth Status : Critical\nError Code : 80E18402\n"
    with pytest.raises(NpuSmiParseError, match=r"NPU 0 chip 1 but no `npu-smi info` table.*save both"):
        faults_from_npu_smi(second_chip)
    with pytest.raises(NpuSmiParseError, match="no `npu-smi info` table"):
        faults_from_npu_smi(smi("npu-smi_health_session_synth.txt"))
    duo = (REFERENCE / "npu-smi_info_310p_duo_synth.txt").read_text()
    (fault,) = faults_from_npu_smi(duo + "\n" + "# npu-smi info -t health -i 1 -c 0\n"
                                   "Health Status : Critical\nError Code : 80E18402\n")
    assert (fault.chip, fault.code_hex) == (0, "0x80E18402")  # NPU 1 chip 0 is device 0
    with pytest.raises(NpuSmiParseError, match=r"NPU 4 chip 0 .* not in this capture's `npu-smi info` table"):
        faults_from_npu_smi(duo + "\n# npu-smi info -t health -i 4 -c 0\nHealth Status : Alarm\n")


def test_the_table_and_health_blocks_together_map_codes_to_the_tables_chips() -> None:
    text = smi("npu-smi_info_910b_alarm_synth.txt") + "\n" + smi("npu-smi_health_session_synth.txt")
    assert shown(faults_from_npu_smi(text)) == [(3, "0x80E18005", False), (5, "0x80E21007", False),
                                                (5, "0x8F00ABCD", False), (6, "none", True)]


def test_numbers_of_thousands_of_digits_are_not_chip_ids_and_crash_nothing() -> None:
    huge = "3" * 6000  # int() refuses strings this long with a ValueError
    table = smi("npu-smi_info_910b_alarm_synth.txt").replace("| 3     910B3 ", f"| {huge} 910B3 ")
    assert shown(faults_from_npu_smi(table)) == [(5, "none", False), (6, "none", True)]
    with pytest.raises(NpuSmiParseError, match="does not say which chip"):
        faults_from_npu_smi(f"# npu-smi info -t health -i {huge} -c 0\nHealth Status : Alarm\n")
    with pytest.raises(NpuSmiParseError, match="does not say which chip"):
        faults_from_npu_smi(f"NPU ID : {huge}\nHealth Status : Alarm\n")


def test_health_output_that_does_not_name_its_chip_is_a_parse_error() -> None:
    with pytest.raises(NpuSmiParseError, match="does not say which chip"):
        faults_from_npu_smi(smi("npu-smi_health_i0_c0_ok_synth.txt"))


@pytest.mark.parametrize("text", ["", "Error: driver not loaded\n", "\x00\x01garbage",
                                  (ASSETS / "npu-smi" / "npu-smi_garbage.txt").read_text(),
                                  (ASSETS / "npu-smi" / "npu-smi_watch_910b_synth.txt").read_text()])
def test_text_without_chip_health_is_a_parse_error_quoting_it(text: str) -> None:
    with pytest.raises(NpuSmiParseError, match="npu-smi"):
        faults_from_npu_smi(text)


# -- every source ----------------------------------------------------------------------------
def fake_npu_smi(tmp_path: Path, body: str) -> str:
    """A test double of npu-smi: a shell script that prints the recorded captures."""
    script = tmp_path / "bin" / "npu-smi"
    script.parent.mkdir(exist_ok=True)
    script.write_text("#!/bin/sh\nPATH=/usr/bin:/bin\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def health_double(tmp_path: Path) -> str:
    return fake_npu_smi(tmp_path, f'''case "$*" in
  "info") cat "{FAULTS / 'npu-smi_info_910b_alarm_synth.txt'}" ;;
  "info -t health -i 3 -c 0") printf 'Health Status : Alarm\\nError Code : 80E18005\\n' ;;
  "info -t health -i 5 -c 0") echo "dcmi module initialize failed. ret is -8005" >&2; exit 255 ;;
  "info -t health -i 6 -c 0") printf 'Health Status : Warning\\nError Code : NA\\n' ;;
  *) echo "unexpected: $*" >&2; exit 3 ;;
esac
''')


def test_read_faults_reads_every_source_not_only_the_first(tmp_path: Path) -> None:
    binary = health_double(tmp_path)
    with serve((FAULTS / "exporter_one_code_synth.txt").read_bytes()) as exporter, \
            serve((FAULTS / "triton_npu_ge_device_errors_synth.txt").read_bytes()) as triton:
        reading = read_faults(NpuSources(exporter_url=exporter, npu_smi="npu-smi", triton_metrics_url=triton,
                                         timeout_s=10), node="n7", which=lambda name: binary)
    assert reading.read == (SOURCE_EXPORTER, SOURCE_NPU_SMI, SOURCE_NPU_GE) and reading.node == "n7"
    by_source = {s: shown([f for f in reading.faults if f.source == s]) for s in reading.read}
    assert by_source[SOURCE_EXPORTER] == [(1, "0x80E18005", False)]
    # chip 3's codes from `-t health`; chip 5's health call failed: its table Health stays, noted
    assert by_source[SOURCE_NPU_SMI] == [(3, "0x80E18005", False), (5, "none", False), (6, "none", True)]
    assert by_source[SOURCE_NPU_GE] == [(1, "ACL 507054", None), (1, "none", False)]
    assert any("health of chip 5" in n and "-8005" in n for n in reading.notes)
    assert all(f.node == "n7" for f in reading.faults)


def test_a_failing_source_is_a_note_when_another_answers(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{closed_port()}/metrics"
    with serve((FAULTS / "triton_npu_ge_device_errors_synth.txt").read_bytes()) as triton:
        reading = read_faults(NpuSources(exporter_url=down, triton_metrics_url=triton, timeout_s=5),
                              which=lambda name: None)
    assert reading.read == (SOURCE_NPU_GE,)
    assert len(reading.notes) == 3 and reading.notes[0].startswith("npu-exporter:")


def test_an_explicit_source_that_fails_when_nothing_else_answers_raises() -> None:
    down = f"http://127.0.0.1:{closed_port()}/metrics"
    with pytest.raises(MetricsUnreachableError):
        read_faults(NpuSources(exporter_url=down, timeout_s=5), which=lambda name: None)


def test_an_exporter_url_that_is_not_an_exporter_is_a_source_error() -> None:
    with serve((ASSETS / "telemetry" / "metrics_2.51_default.txt").read_bytes()) as url, \
            pytest.raises(NpuSourceError, match="npu_chip_info"):
        read_faults(NpuSources(exporter_url=url, timeout_s=5), which=lambda name: None)


def test_a_default_triton_that_does_not_answer_is_only_a_note() -> None:
    down = f"http://127.0.0.1:{closed_port()}/metrics"
    reading = read_faults(NpuSources(triton_metrics_url=down, timeout_s=5), which=lambda name: None)
    assert reading.read == () and reading.faults == () and "Triton" in reading.notes[0]


def test_an_npu_smi_file_replaces_the_binary_and_a_bad_one_raises(tmp_path: Path) -> None:
    saved = tmp_path / "ticket.txt"
    saved.write_text(smi(TABLE_910B) + "\n" + smi("npu-smi_health_session_synth.txt"))
    reading = read_faults(NpuSources(), npu_smi_file=str(saved),
                          which=lambda name: pytest.fail("ran npu-smi"))
    assert reading.read == (SOURCE_NPU_SMI,) and len([f for f in reading.faults if f.code is not None]) == 3
    with pytest.raises(NpuSmiError, match="cannot read the npu-smi file"):
        read_faults(NpuSources(), npu_smi_file=str(tmp_path / "missing.txt"), which=lambda name: None)
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("no npu-smi here\n")
    with pytest.raises(NpuSmiParseError, match="no npu-smi here"):
        read_faults(NpuSources(), npu_smi_file=str(garbage), which=lambda name: None)
    huge = tmp_path / "huge.txt"
    huge.write_bytes(b"x" * ((4 << 20) + 1))
    with pytest.raises(NpuSmiError, match="over 4 MiB"):
        read_faults(NpuSources(), npu_smi_file=str(huge), which=lambda name: None)


def test_npu_smi_on_path_that_fails_is_a_note(tmp_path: Path) -> None:
    binary = fake_npu_smi(tmp_path, 'echo "dcmi module initialize failed. ret is -8005"\nexit 255\n')
    reading = read_faults(NpuSources(timeout_s=10), which=lambda name: binary)
    assert reading.read == () and "-8005" in reading.notes[0]
