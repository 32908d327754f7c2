"""Did Triton load the file an apply wrote (geadmin.ops.models.took_effect)? Judged from the live
config only when every field the change sets is still at its previous value; Triton's
normalizations (defaults filled in, KIND_AUTO resolved, removed fields filled back) never
count as "not loaded". The live configs here are the files as Triton normalizes them; the
apply against a real Triton is tests/integration/test_apply_wrong_repository.py."""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2

from geadmin.ops.models.took_effect import uptake
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.stack.workspace import SAMPLE_REPOSITORY

PREVIOUS = (SAMPLE_REPOSITORY / "digits_classifier" / "config.pbtxt").read_bytes()


def as_triton_serves(data: bytes) -> model_config_pb2.ModelConfig:
    """`data` normalized as Triton 2.51 does: its defaults filled in, a resolved instance kind."""
    config = parse_pbtxt(data.decode())
    if not config.version_policy.WhichOneof("policy_choice"):
        config.version_policy.latest.num_versions = 1
    for index, group in enumerate(config.instance_group):
        group.name = group.name or f"{config.name}_{index}"
        if group.kind == model_config_pb2.ModelInstanceGroup.KIND_AUTO:
            group.kind = model_config_pb2.ModelInstanceGroup.KIND_CPU
    if not config.instance_group:
        config.instance_group.add(name=f"{config.name}_0", count=1,
                                  kind=model_config_pb2.ModelInstanceGroup.KIND_CPU)
    config.default_model_filename = config.default_model_filename or "model.py"
    config.optimization.input_pinned_memory.enable = True
    return config


def changed(old: bytes, new: bytes) -> bytes:
    assert old in PREVIOUS, old
    return PREVIOUS.replace(old, new)


DELAY = changed(b"max_queue_delay_microseconds: 1000", b"max_queue_delay_microseconds: 2500")


def test_a_live_config_that_still_has_every_old_value_did_not_load_the_file() -> None:
    found = uptake(PREVIOUS, DELAY, as_triton_serves(PREVIOUS))
    assert found.changed == ("dynamic_batching.max_queue_delay_microseconds",)
    assert found.still_old == found.changed and found.none_took


def test_a_live_config_with_the_new_values_loaded_it() -> None:
    assert not uptake(PREVIOUS, DELAY, as_triton_serves(DELAY)).none_took


def test_one_field_that_took_is_enough() -> None:
    both = DELAY.replace(b"count: 1", b"count: 2")
    live = as_triton_serves(PREVIOUS.replace(b"count: 1", b"count: 2"))  # as if half of it were there
    found = uptake(PREVIOUS, both, live)
    assert set(found.changed) == {"dynamic_batching.max_queue_delay_microseconds", "instance_group[0].count"}
    assert found.still_old == ("dynamic_batching.max_queue_delay_microseconds",) and not found.none_took


def test_a_field_the_previous_file_lacked_is_still_old_only_while_the_live_config_lacks_it() -> None:
    added = PREVIOUS + b'parameters [{ key: "init_s" value: { string_value: "3" } }]\n'
    assert uptake(PREVIOUS, added, as_triton_serves(PREVIOUS)).none_took
    assert not uptake(PREVIOUS, added, as_triton_serves(added)).none_took


def test_triton_s_normalizations_never_count_as_not_loaded() -> None:
    serves = as_triton_serves
    # removed: Triton fills the default back in, which may be the value the previous file had
    no_kind = changed(b"count: 1 kind: KIND_CPU", b"count: 1")
    assert uptake(PREVIOUS, no_kind, serves(no_kind)).changed == ()
    assert not uptake(PREVIOUS, no_kind, serves(no_kind)).none_took
    # KIND_AUTO: Triton resolves it to the kind the previous file named
    auto = changed(b"kind: KIND_CPU", b"kind: KIND_AUTO")
    assert not uptake(PREVIOUS, auto, serves(auto)).none_took
    # Triton's own default, written out: the live config had it before and after
    policy = PREVIOUS + b"version_policy: { latest: { num_versions: 1 } }\n"
    assert not uptake(PREVIOUS, policy, serves(policy)).none_took
    named = changed(b"count: 1 kind: KIND_CPU", b'count: 1 kind: KIND_CPU name: "digits_classifier_0"')
    assert not uptake(PREVIOUS, named, serves(named)).none_took


def test_a_version_policy_change_is_no_evidence_the_versions_that_stay_keep_the_old_one() -> None:
    both = PREVIOUS + b"version_policy: { specific: { versions: [1, 2] } }\n"
    retired = PREVIOUS + b"version_policy: { specific: { versions: [2] } }\n"
    found = uptake(both, retired, as_triton_serves(both))  # v2 stays loaded, with the config it had
    assert found.changed == () and not found.none_took
    with_delay = retired.replace(b"max_queue_delay_microseconds: 1000", b"max_queue_delay_microseconds: 9")
    assert uptake(both, with_delay, as_triton_serves(both)).none_took  # another field still tells


def test_a_change_it_cannot_read_is_not_judged() -> None:
    assert not uptake(PREVIOUS, b"max_bach_size: 1", as_triton_serves(PREVIOUS)).none_took
    assert not uptake(PREVIOUS, PREVIOUS, as_triton_serves(PREVIOUS)).none_took  # nothing changed
    assert not uptake(PREVIOUS, b"\xff\xfe", as_triton_serves(PREVIOUS)).none_took
