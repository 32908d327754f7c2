"""geadmin.interrupts: SIGTERM and Ctrl-C raise KeyboardInterrupt inside the block, and one whose
raise was dropped (CPython drops it in a fork's at-fork hook: tests/integration/test_preview.py
sends SIGTERM as the preview starts perf_analyzer) is raised by the next `raise_pending`."""

from __future__ import annotations

import contextlib
import signal

import pytest

from geadmin.interrupts import as_interrupts, raise_pending, signals_deferred


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_raises_and_a_dropped_raise_comes_back_once(sig: signal.Signals) -> None:
    before = signal.getsignal(sig)
    with as_interrupts():
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(sig)
        with pytest.raises(KeyboardInterrupt):  # a run asked to stop stops at every poll after
            raise_pending()
    with as_interrupts():
        with contextlib.suppress(KeyboardInterrupt):  # where CPython drops it
            signal.raise_signal(sig)
        with pytest.raises(KeyboardInterrupt):
            raise_pending()
        raise_pending()  # once
    assert signal.getsignal(sig) == before
    raise_pending()  # nothing pending outside a block


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_held_step_is_never_cut_and_the_signal_lands_after_it(sig: signal.Signals) -> None:
    """An apply's outcome row, written after its change: a Ctrl-C then must wait for the row."""
    import os

    steps: list[str] = []
    with as_interrupts(), pytest.raises(KeyboardInterrupt):
        with signals_deferred():
            os.kill(os.getpid(), sig)  # delivered to this (the main) thread once unblocked
            steps.append("the row is written")
        steps.append("never reached")
    assert steps == ["the row is written"]
