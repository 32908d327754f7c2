"""Why did a load fail? The real reason, not "failed to poll from model repository".

Over the API Triton often says only that (FACTS.md); the reason is in its log. So a load
is wrapped: before it, note where the log ends and whether the model was serving; after a
failure, gather

1. the model's lines from what Triton logged since (a `LogSource`),
2. the repository layout problems visible on disk (missing directory, config.pbtxt,
   version directory, model file for the backend),
3. whether the previously loaded version still serves — checked with the repository index
   and a readiness call, never assumed.
"""

from __future__ import annotations

import difflib
import enum
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from geadmin.errors import (
    ExplainedLoadError,
    ExplainedLoadTimeoutError,
    LoadFailedError,
    TritonError,
    TritonTimeoutError,
)
from geadmin.logsource import LogCursor, LogSource
from geadmin.triton import ModelState, TritonClient, model_config_pb2

LOG_SETTLE_S = 1.0  # how long to wait for Triton to flush the lines of a failed load
CONFIG_FILE = "config.pbtxt"

# The file each backend / platform loads from a version directory (any one of them).
MODEL_FILES: dict[str, tuple[str, ...]] = {
    "python": ("model.py",),
    "onnxruntime": ("model.onnx",),
    "onnxruntime_onnx": ("model.onnx",),
    "pytorch": ("model.pt",),
    "pytorch_libtorch": ("model.pt",),
    "tensorflow": ("model.savedmodel", "model.graphdef"),
    "tensorflow_savedmodel": ("model.savedmodel",),
    "tensorflow_graphdef": ("model.graphdef",),
    "tensorrt": ("model.plan",),
    "tensorrt_plan": ("model.plan",),
    "openvino": ("model.xml",),
    "npu_ge": ("model.om", "model.onnx", "model.pb"),
}

# Triton's default log format, and --log-format=ISO8601.
_LOG_LINE = re.compile(
    r"^(?:(?P<sev>[IWEV])\d{4} \S+|\d{4}-\d\d-\d\dT\S+ (?P<sev2>[IWEV]))"
    r"\s+\d+\s+(?P<src>\S+)\]\s?(?P<msg>.*)$"
)


class Serving(str, enum.Enum):
    """What serves the model after the failed load."""

    PREVIOUS = "the previously loaded version is still serving"
    NOTHING = "the model is NOT serving"
    NEVER_LOADED = "the model was not loaded before, and is not serving"
    UNKNOWN = "could not check whether the model is serving"


@dataclass(frozen=True)
class LogLine:
    severity: str  # I, W, E, V; "" for a line Triton did not format (e.g. stub output)
    message: str
    raw: str


@dataclass(frozen=True)
class LoadWatch:
    """Taken just before a load: where the log ended and what was serving."""

    name: str
    cursor: LogCursor | None
    was_ready: bool | None  # None: could not tell
    version: str


@dataclass(frozen=True)
class Explanation:
    model: str
    error: str  # what the API answered
    log_lines: tuple[LogLine, ...] = ()
    layout_problems: tuple[str, ...] = ()
    serving: Serving = Serving.UNKNOWN
    serving_version: str = ""
    serving_error: str = ""  # why the serving check failed (Serving.UNKNOWN)
    log_description: str = ""  # where the log was read; "" when no log source is known
    timed_out: bool = False  # the load was still running when the client gave up

    @property
    def log_reason(self) -> str:
        """The first error (else warning) Triton logged about the model."""
        for severity in ("E", "W"):
            for line in self.log_lines:
                if line.severity == severity:
                    return line.message.split("\n\n")[0].strip()
        return ""

    @property
    def reason(self) -> str:
        """The single most telling reason: the log's, else the layout's, else the API's."""
        return self.log_reason or (self.layout_problems[0] if self.layout_problems else self.error)

    def summary(self) -> str:
        lines = [f"load of {self.model!r} failed: {self.reason}"]
        if self.timed_out:
            lines = [f"load of {self.model!r} did not finish in time (Triton may still be loading "
                     f"it; a stuck backend stub is a common cause): {self.reason}"]
        if self.reason != self.error:
            lines.append(f"  Triton answered: {self.error}")
        lines += [f"  repository: {problem}" for problem in self.layout_problems
                  if problem != self.reason]
        serving = self.serving.value
        if self.serving is Serving.PREVIOUS and self.serving_version:
            serving = f"version {self.serving_version} (the previously loaded one) is still serving"
        if self.serving_error:
            serving = f"{serving}: {self.serving_error}"
        lines.append(f"  {serving}")
        if self.log_lines:
            lines.append(f"  Triton log ({self.log_description}):")
            lines += [f"    {line.raw}" for line in self.log_lines[-20:]]
        elif self.log_description:
            lines.append(f"  nothing about {self.model!r} in the {self.log_description}")
        else:
            lines.append("  Triton's log is not available here (set GEADMIN_TRITON_LOG to its file)")
        return "\n".join(lines)


# -- the log -------------------------------------------------------------------------
def parse_log_line(raw: str) -> LogLine:
    match = _LOG_LINE.match(raw)
    if not match:
        return LogLine("", raw.strip(), raw)
    message = match["msg"].strip()
    if len(message) >= 2 and message[0] == message[-1] == '"':
        try:
            message = json.loads(message)
        except ValueError:
            message = message[1:-1]
    return LogLine(match["sev"] or match["sev2"], message, raw)


def model_log_lines(text: str, name: str) -> list[LogLine]:
    """The lines that name the model (or one of its instances, `name_0_1`)."""
    mentions = re.compile(rf"(?<![\w.-]){re.escape(name)}(?:_\d+_\d+)?(?![\w.-])")
    return [parse_log_line(raw) for raw in text.splitlines() if mentions.search(raw)]


# -- the repository on disk ----------------------------------------------------------
def is_model_name(name: str) -> bool:
    """One directory name inside the repository: never a path that leaves it."""
    return name not in ("", ".", "..") and not any(c in name for c in "/\\\0")


def layout_problems(
    repository: Path, name: str, config: model_config_pb2.ModelConfig | None = None
) -> list[str]:
    """What on disk would stop `name` from loading. `config` overrides config.pbtxt."""
    if not is_model_name(name):
        return [f"{name!r} is not a model name (one directory name, without '/' or '..')"]
    try:
        return _layout_problems(repository, name, config)
    except OSError as exc:
        return [f"cannot read {repository / name}: {exc.strerror or exc}"]


def _layout_problems(
    repository: Path, name: str, config: model_config_pb2.ModelConfig | None
) -> list[str]:
    model_dir = repository / name
    if not model_dir.is_dir():
        return [f"no model directory {model_dir}" + _did_you_mean(repository, name)]
    problems: list[str] = []
    if config is None:
        config, problem = _read_config(model_dir)
        if problem:
            return [problem]
    assert config is not None
    if config.name and config.name != name:
        problems.append(f"{model_dir / CONFIG_FILE} says name: {config.name!r}, but the directory is "
                        f"{name!r}; they must match")
    if config.platform == "graph_executor":
        problems.append("platform 'graph_executor' is not a Triton platform: write "
                        'backend: "npu_ge" instead')
    return problems + _version_problems(model_dir, config)


def _did_you_mean(repository: Path, name: str) -> str:
    if not repository.is_dir():
        return f" (the repository {repository} itself does not exist)"
    close = difflib.get_close_matches(name, [p.name for p in repository.iterdir() if p.is_dir()], n=1)
    return f" — did you mean {close[0]!r}?" if close else ""


def _read_config(model_dir: Path) -> tuple[model_config_pb2.ModelConfig | None, str]:
    path = model_dir / CONFIG_FILE
    if not path.is_file():
        return None, f"no {CONFIG_FILE} in {model_dir}"
    try:
        return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig()), ""
    except (text_format.ParseError, UnicodeDecodeError, OSError) as exc:
        return None, f"{path} does not parse: {exc}"


def _version_problems(model_dir: Path, config: model_config_pb2.ModelConfig) -> list[str]:
    versions = sorted(int(p.name) for p in model_dir.iterdir()
                      if p.is_dir() and p.name.isascii() and p.name.isdigit())
    if not versions:
        return [f"no version directory in {model_dir} (e.g. {model_dir / '1'})"]
    problems = []
    wanted = list(config.version_policy.specific.versions) if config.version_policy.HasField(
        "specific") else [versions[-1]]
    problems += [f"version_policy asks for version {v}, but {model_dir / str(v)} does not exist"
                 for v in wanted if v not in versions]
    kind = config.backend or config.platform
    expected = (config.default_model_filename,) if config.default_model_filename else MODEL_FILES.get(kind)
    for version in (v for v in wanted if v in versions):
        version_dir = model_dir / str(version)
        if expected and not any((version_dir / file).exists() for file in expected):
            problems.append(f"no {' or '.join(expected)} in {version_dir} (the {kind!r} backend loads it)")
    return problems


# -- around a load -------------------------------------------------------------------
def watch(client: TritonClient, name: str, log: LogSource | None) -> LoadWatch:
    """Call just before loading `name`."""
    cursor = log.cursor() if log else None
    try:
        entries = [e for e in client.repository_index() if e.name == name]
    except TritonError:
        return LoadWatch(name, cursor, None, "")
    ready = [e for e in entries if e.state is ModelState.READY]
    return LoadWatch(name, cursor, bool(ready), ready[-1].version if ready else "")


def explain(
    client: TritonClient,
    before: LoadWatch,
    error: BaseException,
    *,
    log: LogSource | None = None,
    repository: Path | None = None,
    config: model_config_pb2.ModelConfig | None = None,
    files_sent: bool = False,
) -> Explanation:
    """Gather the real reason of a failed load of `before.name`."""
    name = before.name
    lines = _read_model_lines(log, before.cursor, name)
    problems: list[str] = []
    if repository is not None and not files_sent:
        problems = layout_problems(repository, name, config)
    serving, version, serving_error = check_serving(client, before)
    return Explanation(
        model=name,
        error=str(error),
        log_lines=tuple(lines),
        layout_problems=tuple(problems),
        serving=serving,
        serving_version=version,
        serving_error=serving_error,
        log_description=log.description if log else "",
        timed_out=isinstance(error, TritonTimeoutError),
    )


def _read_model_lines(log: LogSource | None, cursor: LogCursor | None, name: str) -> list[LogLine]:
    if log is None or cursor is None:
        return []
    deadline = time.monotonic() + LOG_SETTLE_S
    while True:
        lines = model_log_lines(log.read_since(cursor), name)
        if any(line.severity in ("E", "W") for line in lines) or time.monotonic() >= deadline:
            return lines
        time.sleep(0.1)


def check_serving(client: TritonClient, before: LoadWatch) -> tuple[Serving, str, str]:
    """Ask Triton (index + readiness) what serves the model now: (serving, version, error)."""
    try:
        entries = [e for e in client.repository_index() if e.name == before.name]
        ready = [e for e in entries if e.state is ModelState.READY]
        answering = bool(ready) and client.model_ready(before.name)
    except TritonError as exc:
        return Serving.UNKNOWN, "", str(exc)
    if answering:
        return Serving.PREVIOUS, ready[-1].version, ""
    return (Serving.NEVER_LOADED if before.was_ready is False else Serving.NOTHING), "", ""


def load_explained(
    client: TritonClient,
    name: str,
    *,
    log: LogSource | None = None,
    repository: Path | None = None,
    config: model_config_pb2.ModelConfig | None = None,
    files: Mapping[str, bytes] | None = None,
) -> None:
    """`client.load`, raising `ExplainedLoadError` with the real reason when Triton rejects it,
    and `ExplainedLoadTimeoutError` when it does not finish within the client's load timeout."""
    before = watch(client, name, log)
    try:
        client.load(name, config=config, files=files)
    except LoadFailedError as exc:
        explanation = explain(client, before, exc, log=log, repository=repository, config=config,
                              files_sent=bool(files))
        raise ExplainedLoadError(explanation, url=exc.url, status=exc.status) from exc
    except TritonTimeoutError as exc:
        if before.was_ready is None:
            raise  # Triton did not answer before the load either: no server, not a hung load
        explanation = explain(client, before, exc, log=log, repository=repository, config=config,
                              files_sent=bool(files))
        raise ExplainedLoadTimeoutError(explanation, url=exc.url, status=exc.status) from exc


def explanation_dict(explanation: Explanation) -> dict[str, Any]:
    """For `--json` output."""
    return {
        "model": explanation.model,
        "reason": explanation.reason,
        "error": explanation.error,
        "layout_problems": list(explanation.layout_problems),
        "serving": explanation.serving.name,
        "serving_version": explanation.serving_version,
        "timed_out": explanation.timed_out,
        "log_lines": [line.raw for line in explanation.log_lines],
    }
