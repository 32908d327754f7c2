"""The verdict as every face shows it: `geadmin.diagnose.evidence.assess`, with what the
embedded stack knows about the server (`geadmin.stack.server_history`), or the compose
project that runs it (`geadmin.stack.compose_logs`): why its Triton does not answer
(restarting, stopped by whom, exited, its container's last lines) instead of "is the URL
right?", a crash in the last hour while it serves again, and its process. `geadmin status`,
the Overview's banner and the sidebar all call `server_verdict`, so they say the same words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from geadmin import settings
from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import ServerSnapshot
from geadmin.diagnose.verdict import Verdict, VerdictRule
from geadmin.domain import same_server
from geadmin.stack.compose_logs import compose_outage
from geadmin.stack.server_history import ServerHistory, history_for, recent_crash
from geadmin.stack.target import is_stack_server
from geadmin.stack.workspace import StackInfo, Workspace
from geadmin.triton.servers import DEFAULT_TRITON_URL


@dataclass(frozen=True)
class ServerVerdict:
    """A server's verdict with the stack's account of it."""

    verdict: Verdict
    history: ServerHistory | None  # None: not the embedded stack's Triton
    process: dict[str, object] | None  # the stack's Triton process (`stack_process`), else None
    container: str = ""  # while unreachable: why the compose container running it does not serve

    @property
    def outage(self) -> str:
        """While Triton does not answer: why, when the embedded stack or the compose project
        that runs it knows ("" otherwise)."""
        if VerdictRule.UNREACHABLE not in self.verdict.rules:
            return ""
        told = (self.history.down or self.history.silent) if self.history is not None else ""
        return told or self.container

    @property
    def crash(self) -> str:
        """While Triton answers: a crash in the last hour it came back from ("" otherwise)."""
        return recent_crash(self.history) if self.verdict.snapshot.reachable else ""

    @property
    def headline(self) -> str:
        """The first line everywhere: the level and what put it there (the outage's cause first)."""
        return f"{self.verdict.level.value}: {self.outage}" if self.outage else self.verdict.headline

    def to_json(self) -> dict[str, object]:
        return {**self.verdict.to_json(), "headline": self.headline, "outage": self.outage,
                "recent_crash": self.crash, "triton": self.process}


def stack_process(url: str, stack: StackInfo | None) -> dict[str, object] | None:
    """Triton's process when `url` is the running `geadmin up`'s Triton (pid, state, restarts),
    else None: geadmin knows no process of a server it did not start."""
    if not is_stack_server(url, stack):
        return None
    assert stack is not None
    return {"pid": stack.triton_pid, "state": stack.triton_state, "started_at": stack.triton_started_at,
            "restarts": sum(1 for record in stack.exits if record.restarted), "stack_pid": stack.pid}


def server_verdict(snapshot: ServerSnapshot, sources: EvidenceSources | None, stack: StackInfo | None, *,
                   expected: Sequence[str] = ()) -> ServerVerdict:
    """`assess(snapshot, sources, expected)` with the embedded stack's account of the server
    (`stack`: the running `geadmin up`'s, None when there is none). Never raises for Triton
    trouble (it is in the verdict)."""
    verdict = assess(snapshot, sources, expected=expected)
    history = history_for(snapshot.url, stack)
    container = ""
    if not snapshot.reachable and history is None:
        container = compose_outage(snapshot.url) or gone_stack_outage(snapshot.url, sources)
    return ServerVerdict(verdict, history, stack_process(snapshot.url, stack), container)


def gone_stack_outage(url: str, sources: EvidenceSources | None) -> str:
    """Why nothing answers when the workspace's `geadmin up` died without stopping (its
    stack.json left behind): the server was its Triton, or the default address was asked while
    it ran elsewhere. "" otherwise."""
    gone = Workspace((sources.home if sources else None) or settings.home()).gone_stack()
    if gone is None or not (is_stack_server(url, gone) or same_server(url, DEFAULT_TRITON_URL)):
        return ""
    where = "" if is_stack_server(url, gone) else f" (its Triton was at {gone.http_url}, not {url})"
    return (f"`geadmin up` of {gone.home} (pid {gone.pid}) is gone without stopping — killed, or the "
            f"machine restarted; its Triton and dashboard ended with it{where}: start it again with "
            "`geadmin up`")
