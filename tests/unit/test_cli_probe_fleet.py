"""`geadmin probe --fleet NAME --once`: servers a discovery source did not return were not
probed, so the round is never OK (it exited 0 with the problem nowhere in its output)."""

from __future__ import annotations

import argparse

import pytest

from geadmin.cli.exit_codes import ExitCode, worst
from geadmin.cli.probe import _probe
from geadmin.ops.probe import ProbeRound


def once(fleet: str | None = "lab") -> argparse.Namespace:
    return argparse.Namespace(once=True, json=False, fleet=fleet)


def test_a_fleet_round_with_servers_left_unprobed_leads_with_them_and_is_degraded(
        capsys: pytest.CaptureFixture[str]) -> None:
    rounds = [ProbeRound("a", 1.0), ProbeRound("b", 1.0)]
    code = _probe(lambda force: rounds, "the lab fleet", 30, once(),
                  unprobed=lambda: ["dns:triton.internal: no answer", "k8s: a pod left out"])
    assert code == ExitCode.DEGRADED
    first = capsys.readouterr().out.splitlines()[0]
    assert first == ("FLEET DEGRADED: not every server was probed — dns:triton.internal: no answer "
                     "(and 1 more)")
    assert _probe(lambda force: rounds, "the lab fleet", 30, once(), unprobed=list) == ExitCode.OK


def test_the_worst_code_orders_degraded_between_ok_and_failed() -> None:
    assert worst([]) == ExitCode.OK
    assert worst([ExitCode.OK, ExitCode.DEGRADED]) == ExitCode.DEGRADED
    assert worst([ExitCode.DEGRADED, ExitCode.FAILED]) == ExitCode.FAILED
    assert worst([ExitCode.FAILED, ExitCode.UNREACHABLE, ExitCode.OK]) == ExitCode.UNREACHABLE
