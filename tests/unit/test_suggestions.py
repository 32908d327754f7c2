""""Did you mean" prefers the value of the model's last good config (the file on disk, else the
newest kept revision that parses) over the closest string: TYPE_FOO -> TYPE_FP32, not TYPE_BOOL."""

from __future__ import annotations

from pathlib import Path

from geadmin.repository import revisions
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.repository.validate import enum_name_at, validate_text

GOOD = 'name: "m"\nbackend: "python"\ninput [{ name: "x", data_type: TYPE_FP32, dims: [4] }]\n'
BAD = GOOD.replace("TYPE_FP32", "TYPE_FOO")


def model_dir(tmp_path: Path, text: str) -> Path:
    directory = tmp_path / "repo" / "m"
    directory.mkdir(parents=True)
    (directory / "config.pbtxt").write_text(text)
    return directory


def bad_enum_fix(text: str, directory: Path | None, previous: object) -> str:
    (finding,) = validate_text(text, directory, previous=previous)  # type: ignore[arg-type]
    assert finding.rule == "schema.bad_enum"
    return finding.fix


def test_a_kept_revision_with_type_fp32_makes_the_suggestion_type_fp32(tmp_path: Path) -> None:
    home, directory = tmp_path / "home", model_dir(tmp_path, BAD)  # broken by hand on disk
    revisions.record_revision(directory.parent, "m", GOOD.encode(), who="ann", home=home)
    previous = revisions.last_good_config(directory.parent, "m", home=home)
    assert previous is not None
    fix = bad_enum_fix(BAD, directory, previous)
    assert fix == "did you mean TYPE_FP32? (the last good config has it here)"


def test_without_any_revision_the_closest_string_is_suggested_as_before(tmp_path: Path) -> None:
    home, directory = tmp_path / "home", model_dir(tmp_path, BAD)
    previous = revisions.last_good_config(directory.parent, "m", home=home)
    assert previous is None
    assert bad_enum_fix(BAD, directory, previous) == "did you mean TYPE_BOOL?"


def test_the_newest_revision_that_parses_is_the_last_good_one(tmp_path: Path) -> None:
    home, directory = tmp_path / "home", model_dir(tmp_path, BAD)
    revisions.record_revision(directory.parent, "m", GOOD.replace("TYPE_FP32", "TYPE_INT64").encode(),
                              who="ann", home=home)
    revisions.record_revision(directory.parent, "m", GOOD.encode(), who="ann", home=home)
    revisions.record_revision(directory.parent, "m", BAD.encode(), who="ann", home=home)  # newest: broken
    previous = revisions.last_good_config(directory.parent, "m", home=home)
    assert bad_enum_fix(BAD, directory, previous).startswith("did you mean TYPE_FP32?")


def test_the_file_on_disk_is_the_last_good_config_while_an_edit_is_broken(tmp_path: Path) -> None:
    home, directory = tmp_path / "home", model_dir(tmp_path, GOOD.replace("TYPE_FP32", "TYPE_UINT8"))
    previous = revisions.last_good_config(directory.parent, "m", home=home)
    assert bad_enum_fix(BAD, directory, previous).startswith("did you mean TYPE_UINT8?")


def test_a_last_good_config_without_that_field_leaves_the_closest_string(tmp_path: Path) -> None:
    previous = parse_pbtxt('name: "m"\nbackend: "python"\n')  # no input[0]
    assert bad_enum_fix(BAD, None, previous) == "did you mean TYPE_BOOL?"


def test_enum_name_at_reads_the_value_at_a_config_path() -> None:
    config = parse_pbtxt(GOOD + 'instance_group [{ kind: KIND_CPU }]\n')
    assert enum_name_at(config, "input[0].data_type") == "TYPE_FP32"
    assert enum_name_at(config, "instance_group[0].kind") == "KIND_CPU"
    assert enum_name_at(config, "input[3].data_type") is None
    assert enum_name_at(config, "input[0].name") is None  # not an enum
    assert enum_name_at(config, "input.data_type") is None  # a list without an index
    assert enum_name_at(config, "no_such_field") is None
