"""The model repository on disk: parsing, conflicts, validation, templates, new models."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from geadmin.errors.base import GeAdminError


class RepositoryError(GeAdminError):
    """The model repository on disk is missing, unreadable or malformed."""


class ConfigParseError(RepositoryError):
    """A config that does not parse; `line`/`column` are the parser's (1-based)."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None,
                 detail: str = "") -> None:
        super().__init__(message)
        self.line, self.column, self.detail = line, column, detail or message


class ConfigConflictError(RepositoryError):
    """The config changed on disk since it was read: nothing was written."""

    def __init__(self, message: str, *, path: Path, expected_sha256: str, found_sha256: str,
                 base_text: str, disk_text: str, diff_text: str = "") -> None:
        super().__init__(message)
        self.path, self.expected_sha256, self.found_sha256 = path, expected_sha256, found_sha256
        self.base_text = base_text  # what the editor started from ("" when unknown)
        self.disk_text = disk_text  # what is on disk now
        self.diff_text = diff_text  # base -> disk as a unified diff (geadmin.repository.store)

    def diff(self) -> str:
        """What changed on disk since the editor read it (empty when the base is unknown)."""
        return self.diff_text if self.base_text else ""


class ConfigInvalidError(RepositoryError):
    """The validator found errors in a config about to be written; `findings` are all of them
    (`geadmin.repository.validate.Finding`s; `validate.invalid_config` writes the message)."""

    def __init__(self, message: str, findings: Sequence[Any]) -> None:
        super().__init__(message)
        self.findings = list(findings)


class ConfigLockedError(RepositoryError):
    """Another geadmin process is writing (or applying) this model's config right now."""


class TemplateError(RepositoryError):
    """Template knobs that cannot make a config (bad dtype, dims, device ids, ...)."""


class CreateRefusedError(RepositoryError):
    """Nothing was created (name, files or validation); `findings`: the validator's, if it refused."""

    def __init__(self, message: str, findings: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.findings = findings
