"""A failure, split for a tired reader: the cause in one line, the fix, what still serves,
and Triton's log lines apart — never one long paragraph with log lines run together.

`from_explanation` splits what geadmin.diagnose.explain found about a failed load;
`from_message` splits any other message (an error's text, an apply's or a load's message),
pulling out the Triton log lines run into it. pages/ui/errors.py renders a `FailureText`
(headline, fix, serving, then the log lines in an expander); the CLI prints `lines()`.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from geadmin.diagnose.advice import FIX_SEPARATOR
from geadmin.domain import Explanation, Serving

HEADLINE_MAX = 160  # characters; a longer cause is cut at a sentence and the rest goes to details
# Where a Triton log line starts inside a message (default and ISO8601 formats).
_LOG_START = re.compile(r"(?:(?<=\s)|^)(?=(?:[IWEV]\d{4} \d\d:\d\d:\d\d\.\d+|\d{4}-\d\d-\d\dT\S+ [IWEV])"
                        r"\s+\d+\s+\S+\])")
_FIX_MARKERS = (FIX_SEPARATOR, "**Next step:**", "Next step:", "**Fix:**")
_LOG_HEADING = re.compile(r"^\s*Triton log( \(.*\))?:\s*$")
# Where a long cause may be cut: a sentence's end, else a clause's, else any space.
_BREAK = re.compile(r"(?P<sentence>(?<=[.;])\s+|\s+—\s+)|(?P<clause>(?<=:)\s+)|(?P<space>\s+)")
_BREAK_RANK = {"sentence": 2, "clause": 1, "space": 0}


@dataclass(frozen=True)
class FailureText:
    headline: str  # the cause, one line
    fix: str = ""  # what to do
    serving: str = ""  # what still serves ("" when not known or not about a model)
    details: tuple[str, ...] = ()  # the rest of the message, line by line
    log_lines: tuple[str, ...] = ()  # Triton's lines, verbatim
    log_title: str = "Triton's log"

    def lines(self) -> list[str]:
        """Plain text, the cause first (the CLI)."""
        out = [self.headline]
        out += [f"  fix: {self.fix}"] if self.fix else []
        out += [f"  {self.serving}"] if self.serving else []
        out += [f"  {line}" for line in self.details]
        if self.log_lines:
            out.append(f"  {self.log_title}:")
            out += [f"    {line}" for line in self.log_lines]
        return out


def split_fix(text: str) -> tuple[str, str]:
    """(the text without its fix, the first fix) — a fix follows a marker ("— fix:",
    "Next step:") up to the end of its line; fix "" when there is none."""
    kept: list[str] = []
    fix = ""
    for line in text.splitlines():
        for marker in _FIX_MARKERS:
            before, found, after = line.partition(marker)
            if found:
                fix = fix or after.strip().removesuffix(".").strip()
                line = before.rstrip()
                break
        kept.append(line)
    return "\n".join(kept).strip(), fix


def split_log_lines(text: str) -> tuple[str, tuple[str, ...]]:
    """(the text without them, Triton log lines found in it — on lines of their own or run
    together in one paragraph)."""
    prose: list[str] = []
    logs: list[str] = []
    for line in text.splitlines():
        starts = [m.start() for m in _LOG_START.finditer(line)]
        if not starts:
            if not _LOG_HEADING.match(line):
                prose.append(line)
            continue
        if line[:starts[0]].strip():
            prose.append(line[:starts[0]].rstrip().removesuffix(":").rstrip())
        bounds = [*starts, len(line)]
        logs += [line[a:b].strip() for a, b in itertools.pairwise(bounds) if line[a:b].strip()]
    return "\n".join(prose).strip(), tuple(logs)


def one_line(text: str) -> tuple[str, tuple[str, ...]]:
    """(a one-line headline, the rest): the first line, cut at a sentence when too long."""
    first, _, rest = text.strip().partition("\n")
    first = " ".join(first.split())
    more = [line.strip() for line in rest.splitlines() if line.strip()]
    if len(first) > HEADLINE_MAX:
        cuts = [m for m in _BREAK.finditer(first) if HEADLINE_MAX // 3 <= m.start() <= HEADLINE_MAX]
        # the last sentence end, else the first clause end past a third (not "load of 'm' failed:"),
        # else the last space
        best = max(cuts, key=lambda m: (_BREAK_RANK[m.lastgroup or "space"],
                                         -m.start() if m.lastgroup == "clause" else m.start()), default=None)
        if best is not None:
            clean = best.lastgroup != "space"  # a sentence or clause ends there
            more.insert(0, first[best.end():] if clean else "…" + first[best.end():])
            first = first[:best.start()] if clean else first[:best.start()] + "…"
    return first.rstrip(" .;:—") or "failed", tuple(more)


def from_message(message: str, *, fix: str = "", prefix: str = "") -> FailureText:
    """Split any failure message; `fix` is used when the message carries none, `prefix`
    ("load of 'm' failed") leads the headline."""
    prose, logs = split_log_lines(message)
    cause, found_fix = split_fix(prose)
    headline, details = one_line(cause)
    if prefix:
        headline = f"{prefix}: {headline}"
    return FailureText(headline, found_fix or fix.strip().removesuffix("."), "", details, logs)


def serving_text(explanation: Explanation) -> str:
    if explanation.serving is Serving.PREVIOUS and explanation.serving_version:
        text = f"version {explanation.serving_version} (the previously loaded one) is still serving"
    else:
        text = explanation.serving.value
    return f"{text}: {explanation.serving_error}" if explanation.serving_error else text


def from_explanation(explanation: Explanation, *, fix: str = "", prefix: str = "") -> FailureText:
    """Split a failed load's explanation: the reason leads, its fix apart, what serves, the
    API's answer and the repository's problems as details, the log lines verbatim."""
    split = from_message(explanation.reason, fix=fix, prefix=prefix)
    details = list(split.details)
    if explanation.error and explanation.error not in explanation.reason and not explanation.unfinished:
        details.append(f"Triton answered: {' '.join(explanation.error.split())}")
    details += [f"repository: {p}" for p in explanation.layout_problems if p not in explanation.reason]
    if not explanation.log_lines and explanation.log_description:
        details.append(f"nothing about {explanation.model!r} in the {explanation.log_description}")
    title = f"Triton's log ({explanation.log_description})" if explanation.log_description else "Triton's log"
    logs = tuple(line.raw for line in explanation.log_lines[-20:]) + split.log_lines
    return FailureText(split.headline, split.fix, serving_text(explanation), tuple(details), logs, title)
