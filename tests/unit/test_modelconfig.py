"""config.pbtxt <-> ModelConfig: semantic round trips (hypothesis), positions of fields, and
rewrites that keep the user's comments."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2 as pb

from geadmin.errors import ConfigParseError
from geadmin.repository.modelconfig import (
    from_json,
    parse_pbtxt,
    to_file_text,
    to_json,
    to_pbtxt,
)
from geadmin.repository.positions import comments, locate, lost_comments, parse_located
from geadmin.repository.rewrite import rewrite
from geadmin.triton.client import load_json
from tests.support.hypothesis_profiles import examples

MANY = settings(max_examples=examples(1000), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- generated configs -------------------------------------------------------------------
names = st.text(string.ascii_letters + string.digits + "_-.", min_size=1, max_size=10)
any_text = st.text(max_size=12)  # quotes, backslashes, newlines, non-ASCII: escaping must hold
dtypes = st.sampled_from([v for v in pb.DataType.values() if v])
kinds = st.sampled_from(list(pb.ModelInstanceGroup.Kind.values()))


@st.composite
def tensors(draw: st.DrawFn, cls: type) -> object:
    dims = draw(st.lists(st.integers(-1, 4096), max_size=4))
    tensor = cls(name=draw(names), data_type=draw(dtypes), dims=dims)
    if draw(st.booleans()) and cls is pb.ModelInput:
        tensor.reshape.shape.extend(draw(st.lists(st.integers(1, 64), max_size=3)))
    return tensor


@st.composite
def configs(draw: st.DrawFn) -> pb.ModelConfig:
    c = pb.ModelConfig(name=draw(names), max_batch_size=draw(st.integers(0, 64)),
                       backend=draw(st.sampled_from(["npu_ge", "python", "onnxruntime", ""])),
                       default_model_filename=draw(st.sampled_from(["", "model.om", "model.onnx"])))
    c.input.extend(draw(st.lists(tensors(pb.ModelInput), max_size=3)))
    c.output.extend(draw(st.lists(tensors(pb.ModelOutput), max_size=3)))
    for count, kind in draw(st.lists(st.tuples(st.integers(-2, 8), kinds), max_size=2)):
        c.instance_group.add(count=count, kind=kind)
    if draw(st.booleans()):
        c.dynamic_batching.max_queue_delay_microseconds = draw(st.integers(0, 10**7))
        c.dynamic_batching.preferred_batch_size.extend(draw(st.lists(st.integers(-1, 64), max_size=3)))
    for key, value in draw(st.dictionaries(any_text, any_text, max_size=3)).items():
        c.parameters[key].string_value = value
    policy = draw(st.sampled_from(["none", "latest", "all", "specific"]))
    if policy == "latest":
        c.version_policy.latest.num_versions = draw(st.integers(0, 3))
    elif policy == "all":
        c.version_policy.all.SetInParent()
    elif policy == "specific":
        c.version_policy.specific.versions.extend(draw(st.lists(st.integers(0, 9), max_size=3)))
    return c


@MANY
@given(configs())
def test_pbtxt_round_trip_is_exact_on_the_proto(config: pb.ModelConfig) -> None:
    assert parse_pbtxt(to_pbtxt(config)) == config
    assert parse_pbtxt(to_pbtxt(parse_pbtxt(to_pbtxt(config)))) == parse_pbtxt(to_pbtxt(config))
    assert parse_pbtxt(to_file_text(config)) == config
    assert from_json(to_json(config)) == config
    assert from_json(load_json(config)) == config


@MANY
@given(configs(), configs())
def test_rewrite_of_any_config_into_any_text_parses_to_the_new_config(old: pb.ModelConfig,
                                                                       new: pb.ModelConfig) -> None:
    original = "# header\n" + to_file_text(old).replace("\n", "  # note\n", 1)
    result = rewrite(original, new)
    assert parse_pbtxt(result.text) == new
    assert set(result.lost_comments) == set(lost_comments(original, result.text))


@MANY
@given(st.text(max_size=200))
def test_locate_and_comments_never_raise(text: str) -> None:
    located = locate(text)
    assert (located.error is None) == _parses(text)
    assert isinstance(comments(text), list)


def _parses(text: str) -> bool:
    try:
        parse_pbtxt(text)
    except ConfigParseError:
        return False
    return True


# -- the writer's defaults -------------------------------------------------------------------
def test_the_writer_drops_max_batch_size_0_but_file_text_and_load_json_keep_it() -> None:
    config = parse_pbtxt('name: "m"\nbackend: "onnxruntime"\nmax_batch_size: 0\ninput [{ name: "x" }]\n')
    assert "max_batch_size" not in to_pbtxt(config) and "max_batch_size" not in to_json(config)
    assert to_file_text(config).splitlines()[:3] == ['name: "m"', "max_batch_size: 0", "input {"]
    assert json.loads(load_json(config))["max_batch_size"] == 0  # a load's config override
    assert parse_pbtxt(to_file_text(config)) == config


def test_from_json_reads_triton_normalized_json_and_rejects_unknown_fields() -> None:
    config = from_json('{"name": "m", "max_batch_size": 4, "input": [{"name": "x", "dims": ["3", 4]}]}')
    assert config.max_batch_size == 4 and list(config.input[0].dims) == [3, 4]
    with pytest.raises(ConfigParseError, match="does not parse"):
        from_json('{"nam": "m"}')


# -- positions ------------------------------------------------------------------------------------
LOCATED = """# comment
name: "m"
input [
  { name: "x" data_type: TYPE_FP32 dims: [ 3, 4 ] },
  { name: "z" data_type: TYPE_FP16 dims: [ 1 ] }
]
parameters { key: "ge.exec.deviceId" value { string_value: "0" } }
parameters: { key: "device_ids", value: { string_value: "0,1" } }
dynamic_batching {
  preferred_batch_size: 4
  preferred_batch_size: 8
}
"""


@pytest.mark.parametrize(("path", "where"), [
    ("name", (2, 1)), ("input[0]", (3, 1)), ("input[1].data_type", (5, 15)), ("input[0].dims", (4, 36)),
    ("input[0].dims[1]", (4, 36)), ('parameters["ge.exec.deviceId"]', (7, 1)),
    ('parameters["device_ids"].value.string_value', (8, 43)),
    ("dynamic_batching.preferred_batch_size", (10, 3)),
    ("dynamic_batching.preferred_batch_size[1]", (11, 3)),
    ("dynamic_batching.max_queue_delay_microseconds", (9, 1)),  # not written: its message
    ("output[0].dims", None),
])
def test_positions_are_the_parsers_own(path: str, where: tuple[int, int] | None) -> None:
    assert parse_located(LOCATED).position(path) == where


def test_a_text_that_does_not_parse_names_where_and_in_which_message() -> None:
    located = locate('name: "m"\ninput [{ name: "x" data_type: TYPE_FOO }]\n')
    assert located.error is not None and (located.error.line, located.error.column) == (2, 31)
    assert located.error_path == "input[0].data_type" and located.config.name == "m"
    with pytest.raises(ConfigParseError, match="line 2, column 31"):
        parse_located(located.text)


# -- rewrites keep comments -------------------------------------------------------------------------
ORIGINAL = """# resnet50 on two NPUs -- owner: vision team
name: "resnet50"
backend: "npu_ge"
max_batch_size: 8  # largest ATC gear
input [{ name: "x", data_type: TYPE_FP16, dims: [3, 224, 224] }]
output [{ name: "prob", data_type: TYPE_FP32, dims: [1000] }]
instance_group [{ kind: KIND_CPU, count: 2 }]  # one per NPU
dynamic_batching {
  # keep p99 under 20 ms
  max_queue_delay_microseconds: 2000
}
parameters { key: "device_ids" value { string_value: "0,1" } }  # NPUs 0 and 1
"""


def edited(change: object) -> pb.ModelConfig:
    config = parse_pbtxt(ORIGINAL)
    assert callable(change)
    change(config)
    return config


FORM_EDITS = {
    "max_batch_size": lambda c: setattr(c, "max_batch_size", 16),
    "max_batch_size_0": lambda c: setattr(c, "max_batch_size", 0),
    "delay": lambda c: setattr(c.dynamic_batching, "max_queue_delay_microseconds", 500),
    "preferred_sizes_added": lambda c: c.dynamic_batching.preferred_batch_size.extend([4, 8]),
    "instance_count": lambda c: setattr(c.instance_group[0], "count", 4),
    "device_ids": lambda c: setattr(c.parameters["device_ids"], "string_value", "0,1,2,3"),
    "new_parameter": lambda c: setattr(c.parameters["engine"], "string_value", "acl_om"),
    "second_instance_group": lambda c: c.instance_group.add(kind=pb.ModelInstanceGroup.KIND_CPU, count=1),
    "batching_removed_and_readded": lambda c: c.dynamic_batching.preferred_batch_size.append(8),
    "several_at_once": lambda c: (setattr(c, "max_batch_size", 4), setattr(c.instance_group[0], "count", 1),
                                  c.parameters["device_ids"].__setattr__("string_value", "3")),
}


@pytest.mark.parametrize("name", FORM_EDITS)
def test_form_edits_are_written_in_place_and_keep_every_comment(name: str) -> None:
    config = edited(FORM_EDITS[name])
    result = rewrite(ORIGINAL, config)
    assert result.in_place and result.lost_comments == ()
    assert parse_pbtxt(result.text) == config
    assert comments(result.text) == comments(ORIGINAL)
    changed = [line for line in result.text.splitlines() if line not in ORIGINAL.splitlines()]
    assert len(changed) <= 6, result.text  # only the edited lines (or the inserted block)


def test_an_edited_value_stays_on_its_line_next_to_its_comment() -> None:
    result = rewrite(ORIGINAL, edited(FORM_EDITS["max_batch_size"]))
    assert "max_batch_size: 16  # largest ATC gear" in result.text.splitlines()
    result = rewrite(ORIGINAL, edited(FORM_EDITS["device_ids"]))
    assert 'parameters { key: "device_ids" value { string_value: "0,1,2,3" } }  # NPUs 0 and 1' in result.text


def test_removing_a_block_reports_the_comment_that_went_with_it() -> None:
    config = parse_pbtxt(ORIGINAL)
    config.ClearField("dynamic_batching")
    result = rewrite(ORIGINAL, config)
    assert result.in_place and parse_pbtxt(result.text) == config
    assert result.lost_comments == ("# keep p99 under 20 ms",)
    assert "# NPUs 0 and 1" in result.text and "dynamic_batching" not in result.text


def test_removing_a_parameter_cuts_its_line() -> None:
    config = parse_pbtxt(ORIGINAL)
    del config.parameters["device_ids"]
    result = rewrite(ORIGINAL, config)
    assert result.in_place and "device_ids" not in result.text
    assert result.lost_comments == ("# NPUs 0 and 1",)


def test_a_text_that_does_not_parse_is_regenerated_and_says_what_is_lost() -> None:
    config = parse_pbtxt(ORIGINAL)
    result = rewrite(ORIGINAL + "oops {\n# trailing note\n", config)
    assert not result.in_place and parse_pbtxt(result.text) == config
    assert "# trailing note" in result.lost_comments
    assert len(result.lost_comments) == len(comments(ORIGINAL)) + 1


def test_comments_inside_strings_are_not_comments() -> None:
    assert comments('name: "a # b"  # real\n# second\n') == ["# real", "# second"]
    assert lost_comments("# a\n# a\n# b\n", "# a\n") == ["# a", "# b"]
