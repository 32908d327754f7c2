"""Validate model configs without a running Triton, in layers: schema (does the text parse as
a `ModelConfig`), Triton's rules (geadmin.repository.triton_rules: what the server itself
rejects at load), and the npu_ge backend's rules (geadmin.repository.npu_ge_checks, checked
against the real backend by tests/backend/test_validator_agreement.py).

Every finding names its rule, a config path (`input[0].dims`), the line and column where the
text has them, a severity, the cause and the fix. Severity `error` means the load fails;
`warning` that it loads but probably not as meant; `info` something worth knowing.
Nothing here raises on any text or directory: problems are findings. The vocabulary (Finding,
Severity, Context, the rule registry) is geadmin.repository.rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pool
from google.protobuf.message import Message
from tritonclient.grpc.model_config_pb2 import ModelConfig

from geadmin.errors import ConfigInvalidError, ConfigParseError, RepositoryError
from geadmin.repository import (
    cross_model,  # registers Triton's rules, then the cross-model ones
    triton_rules,  # noqa: F401  (registers Triton's rules, first)
)
from geadmin.repository import npu_ge_params as npu_ge
from geadmin.repository.layout import is_model_name
from geadmin.repository.modelconfig import CONFIG_FILE, read_config_text
from geadmin.repository.npu_ge_checks import CHECKS as NPU_GE_CHECKS
from geadmin.repository.positions import Located, locate
from geadmin.repository.rules import (
    RULES,
    Context,
    Finding,
    Issue,
    Severity,
    ValidationRule,
    did_you_mean,
    is_version,
)

__all__ = ["RULES", "ConfigInvalidError", "Finding", "ModelReport", "Severity", "refuse_invalid",
           "rule_catalogue", "summarize", "validate_config", "validate_file", "validate_model",
           "validate_path", "validate_text"]

# -- schema ------------------------------------------------------------------------------
SCHEMA_RULES = {
    "schema.syntax": "the text is not protobuf text format",
    "schema.unknown_field": "a field ModelConfig does not have",
    "schema.bad_enum": "an enum value that does not exist (TYPE_FOO)",
    "schema.unreadable": "config.pbtxt missing, unreadable or not UTF-8",
}
_UNKNOWN_FIELD = re.compile(r'Message type "([\w.]+)" has no field named "([^"]*)"')
_PATH_STEP = re.compile(r"^(\w+)(?:\[(\d+)\])?$")
_BAD_ENUM = re.compile(r'Enum type "([\w.]+)" has no value named (\S+?)\.?$')


def _schema_finding(error: ConfigParseError, located: Located, file: str,
                    previous: ModelConfig | None = None) -> Finding:
    lines = located.text.split("\n")
    quoted = f"'{lines[error.line - 1]}': " if error.line and error.line <= len(lines) else ""
    detail, path = error.detail.removeprefix(quoted), located.error_path
    if field_match := _UNKNOWN_FIELD.search(detail):
        kind, name = field_match[1], field_match[2]
        names = _names(lambda pool: pool.FindMessageTypeByName(kind).fields_by_name)
        rule_id, fix = "schema.unknown_field", did_you_mean(name, names, f"fields of {kind}")
    elif enum_match := _BAD_ENUM.search(detail):
        kind, name = enum_match[1], enum_match[2]
        names = _names(lambda pool: pool.FindEnumTypeByName(kind).values_by_name)
        preferred = enum_name_at(previous, path) if previous is not None else None
        rule_id, fix = "schema.bad_enum", did_you_mean(name, names, f"values of {kind}", preferred=preferred)
    else:
        rule_id, fix = "schema.syntax", ("fix the text at that position (protobuf text format: `field: value`"
                                         ", `message { ... }`, lists in [ ]); Triton refuses the whole file")
    return Finding(rule_id, Severity.ERROR, path, f"does not parse: {detail}", fix, error.line, error.column,
                   file)


def enum_name_at(config: Message, path: str) -> str | None:
    """The name of the enum value at `path` (`input[0].data_type`) in `config`; None when the
    path is not there or not a single enum."""
    message, parts = config, path.split(".")
    try:
        for i, part in enumerate(parts):
            step = _PATH_STEP.match(part)
            field_descriptor = message.DESCRIPTOR.fields_by_name.get(step[1]) if step else None
            if step is None or field_descriptor is None:
                return None
            value = getattr(message, step[1])
            if step[2] is not None:
                value = value[int(step[2])]
            elif field_descriptor.label == field_descriptor.LABEL_REPEATED:
                return None
            if i == len(parts) - 1:
                enum = field_descriptor.enum_type
                return str(enum.values_by_number[value].name) if enum is not None else None
            message = value
    except (IndexError, KeyError, AttributeError, TypeError):
        return None
    return None


def _names(lookup: Callable[[Any], Any]) -> list[str]:
    try:
        return list(lookup(descriptor_pool.Default()))
    except KeyError:
        return []


# -- running the rules ---------------------------------------------------------------------
def validate_text(text: str, directory: Path | None = None, *, file: str = CONFIG_FILE,
                  backends: frozenset[str] | None = None,
                  previous: ModelConfig | None = None) -> list[Finding]:
    """Every finding for one config text; `directory` (its model dir) enables the disk rules
    (and the ensembles on disk that run it); `backends`, the server's, the backend rule;
    `previous`, the model's last good config (revisions.last_good_config): a bad enum value's
    suggestion prefers what it has at that place."""
    located = locate(text, file)
    if located.error is not None:
        return [_schema_finding(located.error, located, file, previous)]
    return validate_config(located.config, directory, located=located, file=file, backends=backends)


def validate_config(config: ModelConfig, directory: Path | None = None, *, located: Located | None = None,
                    file: str = CONFIG_FILE, backends: frozenset[str] | None = None) -> list[Finding]:
    context = Context(config, directory)
    findings = []
    for checker in RULES.values():
        for path, message, fix in _issues(checker, context):
            line, column = (located.position(path) if located else None) or (None, None)
            findings.append(Finding(checker.id, checker.severity, path, message, fix, line, column, file))
    for path, message, fix in cross_model.backend_issues(config, backends):
        line, column = (located.position(path) if located else None) or (None, None)
        findings.append(Finding(cross_model.BACKEND_RULE, Severity.ERROR, path, message, fix, line, column,
                                file))
    order = list(Severity)
    return sorted(findings, key=lambda f: (order.index(f.severity), f.line or 0))


MEMBER_CHANGE_RULE = "ensemble.member_change"  # geadmin.repository.cross_model


def invalid_config(model: str, findings: Sequence[Finding]) -> ConfigInvalidError:
    """The error for `model`'s new config when `findings` hold one or more errors."""
    errors = [f for f in findings if f.severity is Severity.ERROR]
    first = errors[0]
    where = f" (line {first.line})" if first.line else ""
    more = f"; and {_plural(len(errors) - 1, 'more error')}" if len(errors) > 1 else ""
    # The member-change rule: the model itself would load, an ensemble that runs it would not.
    effect = ("would take down an ensemble that runs it" if first.rule == MEMBER_CHANGE_RULE
              else "would not load")
    return ConfigInvalidError(f"the new config of {model!r} {effect}: {first.message}{where} — "
                              f"{first.fix}{more}. Nothing was written", findings)


def refuse_invalid(model: str, text: str, directory: Path | None, *,
                   backends: frozenset[str] | None = None) -> list[Finding]:
    """The findings of `text` as `model`'s config; raises ConfigInvalidError when any is an error."""
    findings = validate_text(text, directory, backends=backends)
    if any(f.severity is Severity.ERROR for f in findings):
        raise invalid_config(model, findings)
    return findings


def _issues(checker: ValidationRule, context: Context) -> list[Issue]:
    try:
        return list(checker.check(context))
    except OSError as exc:
        return [("", f"cannot read {exc.filename or context.directory}: {exc.strerror or exc}",
                 "check the permissions of the model directory")]


@dataclass(frozen=True)
class ModelReport:
    name: str
    directory: Path | None  # the model directory the disk rules ran in; None: none (text rules only)
    findings: list[Finding] = field(default_factory=list)
    file: Path | None = None  # the file validated, when it is not `directory`'s config.pbtxt
    note: str = ""  # how a file outside its model directory was validated (shown after the verdict)

    def count(self, severity: Severity) -> int:
        return sum(f.severity is severity for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        config = self.file or (self.directory / CONFIG_FILE if self.directory else None)
        return {"name": self.name, "directory": str(self.directory) if self.directory else None,
                "config": str(config) if config else None, "note": self.note,
                "findings": [f.to_dict() for f in self.findings]}


def validate_model(directory: Path) -> ModelReport:
    file = directory / CONFIG_FILE
    try:
        text = read_config_text(file)
    except RepositoryError as exc:
        fix = (f"write {file} (every model directory needs one for npu_ge)" if not file.is_symlink()
               and not file.exists() else "make it a readable config file, as the message says")
        finding = Finding("schema.unreadable", Severity.ERROR, "", str(exc), fix, file=str(file))
        return ModelReport(directory.name, directory, [finding])
    return ModelReport(directory.name, directory, validate_text(text, directory, file=str(file)))


def validate_file(path: Path, repository: Path | None = None) -> ModelReport:
    """A config file wherever it is. A config.pbtxt beside version directories is its model's
    (validated in place). Any other file — a copy being edited, `edited.pbtxt`, a config.pbtxt
    in a scratch directory — is the model its `name` names in `repository`, validated as if it
    stood in that model's directory: version directories, model files and the ensembles on
    disk that run it. With no such model known, only the rules that need no directory run, and
    `note` says why."""
    try:
        text = read_config_text(path)
    except RepositoryError as exc:
        finding = Finding("schema.unreadable", Severity.ERROR, "", str(exc), f"check {path}", file=str(path))
        return ModelReport(path.name, None, [finding], file=path)
    if path.name == CONFIG_FILE and _holds_versions(path.parent):
        return ModelReport(path.parent.name, path.parent, validate_text(text, path.parent, file=str(path)))
    located = locate(text, str(path))
    name = located.config.name if located.error is None else ""
    if not name:
        why = ("it has no `name` (a copy outside its model directory needs one to say which model it is)"
               if located.error is None else "it does not parse, so its `name` is unknown")
        return _text_only(path, text, name or path.stem, f"validated {path} without a model directory: {why}")
    if not is_model_name(name):
        return _text_only(path, text, name, f"validated {path} without a model directory: its name {name!r} "
                          "is not one directory name")
    without = f"validated {path} as model {name!r} without its model directory"
    if repository is None:
        return _text_only(path, text, name, f"{without}: "
                          "no repository known (give --repository, set GEADMIN_REPOSITORY, or run it "
                          "beside `geadmin up`); version directories, model files and ensembles were not "
                          "checked")
    directory = repository / name
    if not directory.is_dir():
        return _text_only(path, text, name, f"{without}: {repository} has no model {name!r}; version "
                          "directories, model files and ensembles were not checked")
    return ModelReport(name, directory, validate_text(text, directory, file=str(path)), file=path,
                       note=f"validated {path} as model {name!r} of {repository} (as if it stood in "
                       f"{directory}: its version directories, model files and the ensembles that run it)")


def _text_only(path: Path, text: str, name: str, note: str) -> ModelReport:
    return ModelReport(name, None, validate_text(text, None, file=str(path)), file=path, note=note)


def _holds_versions(directory: Path) -> bool:
    try:
        return any(is_version(p.name) and p.is_dir() for p in directory.iterdir())
    except OSError:
        return False


def validate_path(path: Path, repository: Path | None = None) -> list[ModelReport]:
    """A config file (`validate_file`), a model directory (holds config.pbtxt) or a whole
    repository; `repository` is where a file outside its model directory finds its model."""
    if path.is_file():
        return [validate_file(path, repository)]
    if not path.is_dir():
        raise RepositoryError(f"{path} does not exist" if not path.exists() else f"{path} is not a directory")
    if (path / CONFIG_FILE).exists() or any(is_version(p.name) for p in path.iterdir() if p.is_dir()):
        return [validate_model(path)]
    models = [p for p in sorted(path.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if not models:
        raise RepositoryError(f"{path} is neither a model directory (no {CONFIG_FILE}) nor a repository "
                              "(no model directories in it)")
    return [validate_model(p) for p in models]


def summarize(reports: Sequence[ModelReport]) -> dict[str, Any]:
    """Counts, verdict (`fail` / `warnings` / `ok`) and a one-line headline for `reports`."""
    errors, warnings, infos = (sum(r.count(s) for r in reports) for s in Severity)
    failing, n = sum(r.count(Severity.ERROR) > 0 for r in reports), len(reports)
    models = f"{n} model{'s' * (n != 1)}"
    verdict = "fail" if errors else "warnings" if warnings else "ok"
    headline = {"fail": f"FAIL: {_plural(errors, 'error')} and {_plural(warnings, 'warning')}; {failing} of "
                        f"{models} would not load",
                "warnings": f"OK with warnings: {_plural(warnings, 'warning')} in {models}, no errors",
                "ok": f"OK: {models}, no errors or warnings"}[verdict]
    return {"verdict": verdict, "headline": headline, "errors": errors, "warnings": warnings, "infos": infos,
            "models_checked": n, "models_failing": failing}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


def rule_catalogue() -> dict[str, tuple[str, str]]:
    """rule id -> (severity, summary), every layer."""
    return {**{k: ("error", v) for k, v in SCHEMA_RULES.items()},
            **{r.id: (r.severity.value, r.summary) for r in RULES.values()}}


# -- npu_ge: the checks of npu_ge_checks, registered as rules ------------------------------
def _npu_ge_rule(check: npu_ge.Check) -> Callable[[Context], Iterable[Issue]]:
    def run(ctx: Context) -> Iterable[Issue]:
        return check(ctx.config, ctx.selected_versions) if npu_ge.is_npu_ge(ctx.config) else ()
    return run


for _name_, (_severity, _summary, _check) in NPU_GE_CHECKS.items():
    RULES[f"npu_ge.{_name_}"] = ValidationRule(f"npu_ge.{_name_}", Severity(_severity), _summary,
                                               _npu_ge_rule(_check))
