"""The editor's knobs: read from the text, written back into it keeping comments."""

from __future__ import annotations

import pytest

from geadmin.errors import ConfigParseError, RepositoryError
from geadmin.repository.knobs import (
    Knobs,
    compare_with_live,
    parse_sizes,
    policy_text,
    read_knobs,
    set_policy,
    with_knobs,
)
from geadmin.repository.modelconfig import parse_pbtxt

PYTHON = """# digits: keep this comment
name: "m"
backend: "python"
max_batch_size: 32  # the model's largest batch
dynamic_batching {
  preferred_batch_size: [ 8, 16 ]
  max_queue_delay_microseconds: 1000
}
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
NPU = """name: "r"
backend: "npu_ge"
max_batch_size: 8
parameters { key: "DEVICE_ID" value: { string_value: "0" } }  # old spelling, kept
"""


def test_reads_the_knobs_of_a_python_model() -> None:
    knobs = read_knobs(parse_pbtxt(PYTHON))
    assert knobs == Knobs(32, True, 1000, (8, 16), 1, None, "")


def test_changing_knobs_edits_the_text_in_place_and_keeps_every_comment() -> None:
    knobs = Knobs(16, True, 500, (4, 8), 2, None, "")
    result = with_knobs(PYTHON, knobs)
    assert result.in_place and result.lost_comments == ()
    assert "# digits: keep this comment" in result.text and "# the model's largest batch" in result.text
    assert read_knobs(parse_pbtxt(result.text)) == knobs


def test_turning_dynamic_batching_off_removes_the_block() -> None:
    result = with_knobs(PYTHON, Knobs(32, False, 0, (), 1, None))
    config = parse_pbtxt(result.text)
    assert not config.HasField("dynamic_batching") and "dynamic_batching" not in result.text


def test_npu_ge_device_ids_keep_the_spelling_the_file_uses_and_empty_removes_them() -> None:
    knobs = read_knobs(parse_pbtxt(NPU))
    assert knobs.device_ids == "0" and knobs.instance_count == 1
    changed = with_knobs(NPU, Knobs(8, False, 0, (), 2, "0,1"))
    config = parse_pbtxt(changed.text)
    assert config.parameters["DEVICE_ID"].string_value == "0,1" and "device_ids" not in config.parameters
    assert config.instance_group[0].count == 2
    cleared = parse_pbtxt(with_knobs(NPU, Knobs(8, False, 0, (), 1, "")).text)
    assert "DEVICE_ID" not in cleared.parameters


def test_several_instance_groups_are_left_to_the_text() -> None:
    text = PYTHON.replace("instance_group [ { count: 1 kind: KIND_CPU } ]",
                          "instance_group [ { count: 1 kind: KIND_CPU }, { count: 2 kind: KIND_CPU } ]")
    knobs = read_knobs(parse_pbtxt(text))
    assert knobs.instance_count is None
    assert parse_pbtxt(with_knobs(text, knobs).text).instance_group[1].count == 2
    with pytest.raises(RepositoryError, match="several instance groups"):
        with_knobs(text, Knobs(32, True, 1000, (8, 16), 3, None))


def test_a_text_that_does_not_parse_is_a_parse_error() -> None:
    with pytest.raises(ConfigParseError):
        with_knobs("name: [", Knobs(1, False, 0, (), 1, None))


@pytest.mark.parametrize(("text", "sizes"), [("8, 16", (8, 16)), ("4 8", (4, 8)), ("", ())])
def test_parse_sizes(text: str, sizes: tuple[int, ...]) -> None:
    assert parse_sizes(text) == sizes


def test_parse_sizes_names_the_bad_item() -> None:
    with pytest.raises(RepositoryError, match="'x' is not a whole number"):
        parse_sizes("8, x")


def test_live_comparison_ignores_triton_defaults_and_names_real_differences() -> None:
    live = parse_pbtxt(PYTHON)
    live.platform = "python"  # Triton fills defaults in
    live.instance_group[0].name = "m_0"
    assert compare_with_live(PYTHON, live).same
    live.max_batch_size = 4
    assert compare_with_live(PYTHON, live).differing == ("max_batch_size",)


@pytest.mark.parametrize("text, shown", [("", ""), ("all", "all"), ("latest 2", "latest 2"),
                                         ("2, 1", "1, 2"), ("3", "3"), ("1 1 2", "1, 2")])
def test_the_version_policy_reads_and_writes_as_one_line(text: str, shown: str) -> None:
    config = parse_pbtxt(PYTHON)
    set_policy(config, text)
    assert policy_text(config) == shown
    written = with_knobs(PYTHON, Knobs(32, True, 1000, (8, 16), 1, None, text))
    assert policy_text(parse_pbtxt(written.text)) == shown and "# digits: keep this comment" in written.text


@pytest.mark.parametrize("text", ["latest", "latest 0", "newest", "1, x", "0"])
def test_a_version_policy_that_is_none_of_the_forms_is_refused_with_them(text: str) -> None:
    with pytest.raises(RepositoryError, match="use all, latest N, or versions such as 1, 2"):
        set_policy(parse_pbtxt(PYTHON), text)


def test_knobs_without_versions_leave_the_policy_as_it_is() -> None:
    text = PYTHON + "version_policy { specific { versions: [ 1, 3 ] } }\n"
    assert policy_text(parse_pbtxt(with_knobs(text, Knobs(8, False, 0, (), 1, None)).text)) == "1, 3"
