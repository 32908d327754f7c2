"""geadmin.interrupts: SIGTERM and Ctrl-C raise KeyboardInterrupt inside the block, and one whose
raise was dropped (CPython drops it in a fork's at-fork hook: tests/integration/test_preview.py
sends SIGTERM as the preview starts perf_analyzer) is raised by the next `raise_pending`."""

from __future__ import annotations

import contextlib
import signal

import pytest

from geadmin.interrupts import as_interrupts, raise_pending


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
