"""The hold on a Triton that answers nothing: how long, what it says, what ends it."""

from __future__ import annotations

import pytest

from geadmin.errors import TritonNotAskedError, TritonTimeoutError
from geadmin.triton.silence import Silence


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_hold_fails_every_call_at_once_until_it_ends() -> None:
    clock = Clock()
    silence = Silence("http://h:8000", hold_s=15.0, clock=clock)
    silence.check("list the model repository")  # nothing held: asked
    first = silence.unanswered("check liveness", 5.0)
    assert str(first).startswith("check liveness: Triton at http://h:8000 accepts connections but answered "
                                 "nothing in 5s — it is hung or overloaded, not down")
    clock.now += 4
    with pytest.raises(TritonNotAskedError) as raised:  # nothing sent: never a timeout
        silence.check("read the config of 'm'")
    assert str(raised.value).startswith("read the config of 'm': not asked — Triton at http://h:8000 "
                                        "answered nothing in 5s when asked to check liveness 4s ago")
    assert str(raised.value).endswith("geadmin asks it again in 11s")
    assert raised.value.url == "http://h:8000" and not isinstance(raised.value, TritonTimeoutError)
    clock.now += 11
    assert not silence.holding
    silence.check("check liveness")  # the hold is over: asked again


def test_any_answer_ends_the_hold() -> None:
    silence = Silence("http://h:8000", clock=Clock())
    silence.unanswered("check readiness", 5.0)
    assert silence.holding
    silence.answered()
    assert not silence.holding
    silence.check("check readiness")
