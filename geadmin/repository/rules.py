"""The validator's vocabulary: a finding, its severity, the config under validation
(`Context`), and the rule registry every layer of geadmin.repository.validate adds to.
Rules are plain functions yielding (path, message, fix); `@rule` registers one."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any

from tritonclient.grpc.model_config_pb2 import ModelConfig

Issue = tuple[str, str, str]  # (path, message, fix)


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Finding:
    rule: str  # e.g. "npu_ge.device_ids_syntax"
    severity: Severity
    path: str  # config path (`input[0].dims`), a file in the model dir (`1/model.om`), or ""
    message: str  # the cause
    fix: str  # what to change
    line: int | None = None  # 1-based, in `file`
    column: int | None = None
    file: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity.value, "path": self.path, "line": self.line,
                "column": self.column, "message": self.message, "fix": self.fix, "file": self.file}

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line, self.column) if p)
        path = f" {self.path}:" if self.path else ""
        return f"{where + ': ' if where else ''}{self.severity.value} [{self.rule}]{path} {self.message}"


@dataclass(frozen=True)
class Context:
    """One config under validation; `directory` is its model directory when it is on disk."""

    config: ModelConfig
    directory: Path | None = None

    @cached_property
    def existing_versions(self) -> dict[int, Path]:
        """Version directories as Triton reads them (digits, no leading zero)."""
        if self.directory is None or not self.directory.is_dir():
            return {}
        return {int(p.name): p for p in self.directory.iterdir() if p.is_dir() and is_version(p.name)}

    @cached_property
    def selected_versions(self) -> dict[int, Path]:
        policy, existing = self.config.version_policy, self.existing_versions
        if policy.HasField("specific"):
            return {v: existing[v] for v in policy.specific.versions if v in existing}
        if policy.HasField("all"):
            return dict(existing)
        keep = policy.latest.num_versions if policy.HasField("latest") else 1
        return {v: existing[v] for v in sorted(existing, reverse=True)[:keep]}

    @property
    def is_ensemble(self) -> bool:
        return self.config.platform == "ensemble"


def is_version(name: str) -> bool:
    return name.isascii() and name.isdigit() and (name == "0" or not name.startswith("0"))


@dataclass(frozen=True)
class ValidationRule:
    id: str
    severity: Severity
    summary: str
    check: Callable[[Context], Iterable[Issue]]


RULES: dict[str, ValidationRule] = {}


def rule(rule_id: str, severity: Severity, summary: str) -> Callable[[Callable[[Context], Iterable[Issue]]],
                                                                        Callable[[Context], Iterable[Issue]]]:
    def register(check: Callable[[Context], Iterable[Issue]]) -> Callable[[Context], Iterable[Issue]]:
        RULES[rule_id] = ValidationRule(rule_id, severity, summary, check)
        return check
    return register


def did_you_mean(name: str, names: Sequence[str], what: str, *, preferred: str | None = None) -> str:
    """A fix naming `preferred` (what the last good config has at that place) when it is one
    of `names`, else the closest of `names`, else listing some of them."""
    if preferred and preferred != name and preferred in names:
        return f"did you mean {preferred}? (the last good config has it here)"
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    return f"did you mean {close[0]}?" if close else f"use one of the {what}: {', '.join(names[:12])}"
