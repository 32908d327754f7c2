"""geadmin.diagnose.npu_faults.assess_faults and geadmin.diagnose.fault_plan: which models a
fault hits, the share of their instances lost, whether it needs action, and the plan per level."""

from __future__ import annotations

from geadmin.diagnose.npu_faults import StepKind, assess_faults
from tests.support.faults import (
    AICORE_RETRY,
    CHIP_OUT,
    HBM_ECC,
    LINK_FLAP,
    SENSOR_NOTE,
    UNLISTED,
    model_map,
    npu,
    record,
    table,
)


def test_one_code_names_the_models_on_the_chip_and_the_share_lost_and_plans_drain_then_reset() -> None:
    maps = {"": model_map(resnet={3: 1, 1: 1}, bert={2: 1})}
    report = assess_faults([record(3, HBM_ECC)], table(), maps, ensembles={"resnet": ["pipeline"]},
                           devices={"": [npu(3, npu_id=5, chip_id=1), npu(1, npu_id=4, chip_id=0)]})
    (impact,) = report.impacts
    assert impact.counts and report.needs_action and report.models_down == ()
    assert [(h.model, h.instances_lost, h.instances_total, h.ensembles) for h in impact.hits] == [
        ("resnet", 1, 2, ("pipeline",))]
    drain, reset = impact.plan
    assert (drain.kind, drain.model, drain.device_ids, drain.changes) == (
        StepKind.DRAIN, "resnet", (1,), True)
    assert (reset.kind, reset.command, reset.changes) == (
        StepKind.RESET, "npu-smi set -t reset -i 5 -c 1", False)


def test_the_reset_command_leaves_the_npu_and_chip_ids_to_fill_in_when_no_source_gave_them() -> None:
    report = assess_faults([record(3, HBM_ECC)], table(), {"": model_map(resnet={3: 1})})
    assert report.impacts[0].plan[-1].command == ("npu-smi set -t reset -i <NPU ID of device 3> "
                                                  "-c <Chip ID of device 3>")


def test_several_codes_on_one_chip_count_each_instance_once_and_the_worst_comes_first() -> None:
    maps = {"": model_map(resnet={0: 2, 1: 2})}
    records = [record(0, SENSOR_NOTE), record(0, AICORE_RETRY), record(0, HBM_ECC)]
    report = assess_faults(records, table(), maps)
    levels = [i.cls.level.value for i in report.impacts]
    assert levels == ["RestartNPU", "RestartBusiness", "NotHandleFault"]
    assert [i.counts for i in report.impacts] == [True, True, False]
    assert {(h.instances_lost, h.instances_total) for i in report.impacts for h in i.hits} == {(2, 4)}
    assert [s.kind for s in report.impacts[1].plan] == [StepKind.RELOAD]
    assert report.impacts[1].plan[0].changes and report.impacts[1].plan[0].model == "resnet"
    assert [s.kind for s in report.impacts[2].plan] == [StepKind.NONE]


def test_an_unknown_code_counts_only_on_a_chip_reported_unhealthy() -> None:
    maps = {"": model_map(resnet={0: 1, 1: 1})}
    unhealthy = assess_faults([record(0, UNLISTED, healthy=False)], table(), maps)
    healthy = assess_faults([record(0, UNLISTED, healthy=True)], table(), maps)
    no_code = assess_faults([record(1, None, healthy=False)], table(), maps)
    assert unhealthy.needs_action and unhealthy.impacts[0].cls.level.value == "unknown"
    assert [s.kind for s in unhealthy.impacts[0].plan] == [StepKind.DRAIN, StepKind.RESET]
    assert not healthy.needs_action and [s.kind for s in healthy.impacts[0].plan] == [StepKind.WATCH]
    assert no_code.needs_action and no_code.impacts[0].hits[0].instances_lost == 1


def test_a_not_handle_fault_alone_is_shown_and_not_alarmed_and_subhealth_is_watched() -> None:
    maps = {"": model_map(resnet={0: 1})}
    report = assess_faults([record(0, SENSOR_NOTE), record(0, LINK_FLAP)], table(), maps)
    assert len(report.impacts) == 2 and not report.needs_action and report.models_down == ()
    assert {i.cls.level.value: i.plan[0].kind for i in report.impacts} == {
        "NotHandleFault": StepKind.NONE, "SubHealthFault": StepKind.WATCH}
    assert all(h.instances_lost == 0 for i in report.impacts for h in i.hits)


def test_a_subhealth_fault_on_a_chip_reported_unhealthy_counts() -> None:
    report = assess_faults([record(0, LINK_FLAP, healthy=False)], table(), {"": model_map(resnet={0: 1})})
    assert report.needs_action and report.models_down == ("resnet",)


def test_a_cleared_fault_is_shown_and_never_counts() -> None:
    maps = {"": model_map(resnet={3: 1})}
    report = assess_faults([record(3, HBM_ECC, present=False, healthy=False)], table(), maps)
    (impact,) = report.impacts
    assert not impact.counts and not report.needs_action and report.models_down == ()
    assert impact.hits[0].instances_lost == 0 and impact.plan[0].kind is StepKind.NONE
    assert "cleared" in impact.plan[0].text


def test_a_model_on_every_faulted_chip_is_down_and_draining_says_it_has_no_device_left() -> None:
    maps = {"": model_map(resnet={0: 1, 1: 1}, bert={1: 1, 2: 1})}
    report = assess_faults([record(0, HBM_ECC), record(1, HBM_ECC)], table(), maps)
    assert report.models_down == ("resnet",)
    drains = {s.model: s for i in report.impacts for s in i.plan if s.kind is StepKind.DRAIN}
    assert drains["resnet"].device_ids == () and "no other healthy device" in drains["resnet"].text
    assert drains["bert"].device_ids == (2,)


def test_two_nodes_keep_their_own_chips_and_maps() -> None:
    maps = {"node-a": model_map(resnet={0: 1}), "node-b": model_map(resnet={0: 1, 1: 1})}
    report = assess_faults([record(0, HBM_ECC, node="node-a"), record(1, AICORE_RETRY, node="node-b")],
                           table(), maps)
    by_node = {i.record.fault.node: i for i in report.impacts}
    assert by_node["node-a"].hits[0].down and not by_node["node-b"].hits[0].down
    assert (by_node["node-b"].hits[0].instances_lost, by_node["node-b"].hits[0].instances_total) == (1, 2)
    assert report.models_down == ("resnet",)
    assert "no other healthy device" in by_node["node-a"].plan[0].text
    assert "NPU 0 on node node-a" in by_node["node-a"].plan[-1].text


def test_a_drain_on_a_fleet_node_goes_through_a_rollout_limited_to_that_node() -> None:
    maps = {"node-a": model_map(resnet={0: 1, 1: 1})}
    report = assess_faults([record(0, HBM_ECC, node="node-a")], table(), maps)
    assert "device_ids 1 (without 0) through a rollout limited to node node-a" in \
        report.impacts[0].plan[0].text


def test_a_fault_on_a_node_without_a_map_hits_no_model_and_says_so() -> None:
    report = assess_faults([record(2, HBM_ECC, node="elsewhere")], table(), {"": model_map(resnet={2: 1})})
    assert report.impacts[0].hits == () and report.needs_action
    assert report.notes == ("no model map for elsewhere: the models its faults hit are not known",)


def test_separate_moves_the_instances_off_the_chip_when_the_memory_fits() -> None:
    maps = {"": model_map(resnet={0: 1, 1: 1})}
    devices = {"": [npu(0, 0, 0, used_gib=8), npu(1, 0, 1, used_gib=8, total_gib=32)]}
    report = assess_faults([record(0, CHIP_OUT)], table(), maps, devices=devices)
    (move,) = report.impacts[0].plan
    assert (move.kind, move.device_ids, move.changes) == (StepKind.MOVE, (1,), True)
    assert "fits: about 8192 MiB per instance" in move.text


def test_separate_says_when_the_move_does_not_fit_and_what_to_unload() -> None:
    maps = {"": model_map(resnet={0: 2}, bert={1: 1})}
    devices = {"": [npu(0, 0, 0, used_gib=20), npu(1, 0, 1, used_gib=25, total_gib=32)]}
    report = assess_faults([record(0, CHIP_OUT)], table(), maps, devices=devices)
    (move,) = report.impacts[0].plan
    assert move.kind is StepKind.MOVE and move.device_ids == (1,) and not move.changes
    assert "does not fit: NPU 1 has 7168 MiB free, it needs about 20480 MiB" in move.text
    assert "unload bert from them first" in move.text


def test_separate_without_hbm_figures_says_the_memory_was_not_checked() -> None:
    report = assess_faults([record(0, CHIP_OUT)], table(), {"": model_map(resnet={0: 1, 1: 1})})
    (move,) = report.impacts[0].plan
    assert move.changes and "memory not checked" in move.text
