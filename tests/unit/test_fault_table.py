"""The NPU fault table: the shipped table parses, every level has an action, every entry cites
its source; codes classify (unknown ones as UNKNOWN, never dropped); an operator's override in
MindCluster's faultCode.json shape merges on top, and a malformed one is a FaultTableError
naming the file and the entry."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from geadmin.errors import FaultTableError
from geadmin.telemetry.sources import fault_table
from geadmin.telemetry.sources.fault_table import (
    OVERRIDE_KEYS,
    FaultLevel,
    builtin_table,
    load_table,
)
from geadmin.telemetry.sources.npu_faults import SOURCE_EXPORTER, SOURCE_NPU_GE

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the 3.10 backport
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "geadmin" / "telemetry" / "sources" / fault_table.TABLE_RESOURCE


def test_the_shipped_table_parses_and_every_level_has_an_action_and_a_meaning() -> None:
    table = load_table("")
    assert set(table.levels) == set(FaultLevel)
    for level, text in table.levels.items():
        assert text.action and text.meaning and text.for_inference, level
    assert len(table.entries) > 300  # MindCluster v7.3.2 grades 353 chip codes
    assert "MindCluster" in table.source and "2026" in table.source
    assert table.override == ""


def test_every_entry_has_a_level_an_action_and_cites_a_source() -> None:
    document = json.loads(SHIPPED.read_text())
    for key, source in document["sources"].items():
        assert source["name"] and source["where"], key
    for section in document["sections"]:
        assert section["source"] in document["sources"], section["name"]
    names = [s["name"] for s in document["sources"].values()]
    for code, entry in load_table("").entries.items():
        assert entry.code == code and entry.level is not FaultLevel.UNKNOWN
        assert entry.action and entry.for_inference and entry.meaning
        assert entry.source.startswith("built-in table (") and any(n in entry.source for n in names), code


def test_codes_are_32_bit_and_the_acl_section_does_not_collide_with_the_driver_codes() -> None:
    table = load_table("")
    assert all(0 < code <= 0xFFFFFFFF for code in table.entries)
    assert table.acl_codes and all(code < 0x01000000 for code in table.acl_codes)
    assert all(code >= 0x01000000 for code in set(table.entries) - table.acl_codes)


def test_facts_carried_over_from_huaweis_tables() -> None:
    table = load_table("")
    assert table.classify(0x80E21007).level is FaultLevel.NOT_HANDLE  # MindCluster and ModelArts: L1
    assert table.classify(0x80E18005).level is FaultLevel.RESTART_NPU
    assert "parity" in table.classify(0x80E18005).meaning.lower()
    assert table.classify(0x80C98008).level is FaultLevel.RESTART_REQUEST
    assert table.classify(0x8C204E00).level is FaultLevel.RESTART_BUSINESS
    assert table.classify(0x8C0E4E00).level is FaultLevel.FREE_RESTART_NPU
    assert table.classify(0x80E3A201).level is FaultLevel.SEPARATE_NPU
    assert table.classify(0x81A3880C).level is FaultLevel.SUBHEALTH
    # listed twice by MindCluster (RestartBusiness and SeparateNPU): the graver level holds
    assert table.classify(0xA2301001).level is FaultLevel.SEPARATE_NPU


def test_each_level_carries_its_default_action() -> None:
    table = load_table("")
    assert table.classify(0x80E21007).action.startswith("none")
    assert table.classify(0x81A3880C).action.startswith("watch")
    assert "reload" in table.classify(0x80C98008).action
    assert "reload" in table.classify(0x8C204E00).action
    for code in (0x8C0E4E00, 0x80E18005):
        assert "drain" in table.classify(code).action and "npu-smi" in table.classify(code).action
    assert "move the instances off" in table.classify(0x80E3A201).action


def test_npu_ge_acl_codes_classify_in_their_own_section() -> None:
    table = load_table("")
    ecc = table.classify(507054, SOURCE_NPU_GE)
    assert ecc.level is FaultLevel.RESTART_NPU and "ECC" in ecc.meaning and "rt_error_codes" in ecc.source
    assert table.classify(507015, SOURCE_NPU_GE).level is FaultLevel.RESTART_BUSINESS
    assert table.classify(507054, SOURCE_EXPORTER).level is FaultLevel.UNKNOWN  # not a driver code
    assert table.classify(0x80E21007, SOURCE_NPU_GE).level is FaultLevel.UNKNOWN  # not an ACL error


def test_an_unlisted_code_and_no_code_are_unknown_never_dropped() -> None:
    table = load_table("")
    unknown = table.classify(0x8F00ABCD)
    assert unknown.level is FaultLevel.UNKNOWN and unknown.code == 0x8F00ABCD
    assert "0x8F00ABCD" in unknown.meaning and "unhealthy" in unknown.for_inference and unknown.action
    none = table.classify(None)
    assert none.level is FaultLevel.UNKNOWN and none.code is None and "without a fault code" in none.meaning


def test_the_table_ships_as_package_data() -> None:
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert fault_table.TABLE_RESOURCE in package_data["geadmin.telemetry.sources"]
    # read through importlib.resources, as an installed package reads it (not by a source path)
    builtin_table.cache_clear()
    assert builtin_table().entries == load_table("").entries


def test_the_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        load_table("").entries[1] = load_table("").classify(0x80E21007)  # type: ignore[index]


# -- the operator's override ------------------------------------------------------------------
def write(tmp_path: Path, document: object, name: str = "faultCode.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_an_override_in_mindclusters_shape_merges_on_top(tmp_path: Path) -> None:
    path = write(tmp_path, {"SeparateNPUCodes": ["80E21007"], "NotHandleFaultCodes": ["0x8F00ABCD"],
                            "RestartNPUCodes": [], "FaultFrequency": [{"EventId": ["80E18005"]}]})
    table = load_table(path)
    moved = table.classify(0x80E21007)
    assert moved.level is FaultLevel.SEPARATE_NPU and moved.source == f"override {path}"
    assert "move the instances off" in moved.action
    added = table.classify(0x8F00ABCD)
    assert added.level is FaultLevel.NOT_HANDLE and added.action.startswith("none")
    assert table.classify(0x80E18005).level is FaultLevel.RESTART_NPU  # untouched
    assert table.override == str(path)
    assert load_table("").classify(0x80E21007).level is FaultLevel.NOT_HANDLE  # the built-in unchanged


def test_a_moved_code_says_its_new_levels_meaning_and_keeps_a_meaning_of_its_own(tmp_path: Path) -> None:
    # 0x80E18402 is SeparateNPU built in, with only its level's meaning; 0x80E18005 has its own
    override = {"RestartNPUCodes": ["80E18402"], "NotHandleFaultCodes": ["80E18005"]}
    table = load_table(write(tmp_path, override))
    moved = table.classify(0x80E18402)
    assert moved.level is FaultLevel.RESTART_NPU
    assert moved.meaning == f"{table.levels[FaultLevel.RESTART_NPU].meaning} (RestartNPU)"
    assert "SeparateNPU" not in moved.meaning and "does not repair" not in moved.meaning
    own = table.classify(0x80E18005)
    assert own.level is FaultLevel.NOT_HANDLE and own.meaning.startswith("HBM controller CA parity error")


def test_pre_separate_codes_take_the_separate_level(tmp_path: Path) -> None:
    table = load_table(write(tmp_path, {"PreSeparateNPUCodes": ["80E21007"]}))
    assert table.classify(0x80E21007).level is FaultLevel.SEPARATE_NPU


def test_the_setting_names_the_override_and_an_empty_path_means_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, {"SubHealthFaultCodes": ["80E21007"]})
    monkeypatch.setenv("GEADMIN_NPU_FAULT_TABLE", str(path))
    assert load_table().classify(0x80E21007).level is FaultLevel.SUBHEALTH
    assert load_table("").classify(0x80E21007).level is FaultLevel.NOT_HANDLE
    monkeypatch.delenv("GEADMIN_NPU_FAULT_TABLE")
    assert load_table().override == ""


def test_every_mindcluster_level_key_is_accepted(tmp_path: Path) -> None:
    document = {key: [f"8F00{index:04X}"] for index, key in enumerate(OVERRIDE_KEYS)}
    table = load_table(write(tmp_path, document))
    assert {table.classify(0x8F000000 + i).level for i in range(len(OVERRIDE_KEYS))} == \
        set(FaultLevel) - {FaultLevel.UNKNOWN}


@pytest.mark.parametrize(("document", "names"), [
    ("{not json", ["not JSON"]),
    ("\xff\xfe", ["not JSON"]),
    ("[1, 2]", ["JSON object", "list"]),
    ({"RestartNPUCode": ["80E21007"]}, ["unknown level key", "'RestartNPUCode'"]),
    ({"RestartNPUCodes": "80E21007"}, ["RestartNPUCodes must be a list"]),
    ({"RestartNPUCodes": ["80E21007", "80E2100"]}, ["RestartNPUCodes[1]", "'80E2100'", "8 hex digits"]),
    ({"SeparateNPUCodes": ["200001002"]}, ["SeparateNPUCodes[0]", "'200001002'"]),
    ({"SeparateNPUCodes": ["80E2100G"]}, ["'80E2100G'"]),
    ({"SeparateNPUCodes": [2162298887]}, ["SeparateNPUCodes[0]", "2162298887"]),
    ("[" * 100_000, ["not JSON"]),
])
def test_a_malformed_override_is_an_error_naming_the_file_and_the_entry(tmp_path: Path, document: object,
                                                                          names: list[str]) -> None:
    path = write(tmp_path, document)
    with pytest.raises(FaultTableError) as caught:
        load_table(path)
    assert str(path) in str(caught.value) and caught.value.path == str(path)
    for name in names:
        assert name in str(caught.value)


def test_a_missing_or_huge_override_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FaultTableError, match="cannot read"):
        load_table(tmp_path / "missing.json")
    huge = write(tmp_path, json.dumps({"RestartNPUCodes": ["80E21007"] * 200_000}), "huge.json")
    with pytest.raises(FaultTableError, match="over"):
        load_table(huge)
    many = write(tmp_path, {"RestartNPUCodes": [f"{i:08X}" for i in range(20_001)]}, "many.json")
    with pytest.raises(FaultTableError, match="more than 20000 codes"):
        load_table(many)
