"""The config history: before a config is overwritten, its exact bytes are kept as a revision
in the workspace database (`config_revisions`, see `geadmin.db`), not next to the file — the
model directory holds only what Triton should see, a revision and its metadata (when, who,
why, hash) are stored in one transaction, one file on one volume holds the whole history,
and two geadmin processes never race on backup file names. `history` lists them,
`read_revision` returns one, byte for byte; `text_diff` / `config_diff` compare two texts.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tritonclient.grpc.model_config_pb2 import ModelConfig

from geadmin import db
from geadmin.errors import ConfigParseError, RepositoryError, WorkspaceDatabaseError
from geadmin.repository.modelconfig import CONFIG_FILE, parse_pbtxt, read_config_text

_COLUMNS = "number, at, sha256, who, note, content"
MAX_REVISION = 2**63 - 1  # SQLite's largest INTEGER: a revision number beyond it cannot be asked for


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Revision:
    """One earlier (or the current) content of a model's config, kept in the workspace."""

    number: int  # 1, 2, ... per repository and model
    at: datetime  # UTC
    sha256: str
    who: str
    note: str
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


def _key(repository: Path) -> str:
    return str(Path(repository).expanduser().resolve())


def _revision(row: Sequence[Any]) -> Revision:
    number, at, sha, who, note, content = row
    return Revision(int(number), db.parse_time(at), sha, who, note, bytes(content))


def record_revision(repository: Path, model: str, data: bytes, *, who: str, note: str = "",
                    home: Path | None = None) -> Revision:
    """Keep `data` as the model's newest revision, unless the newest already has it."""
    sha = sha256_of(data)
    with db.connect(home) as conn, db.transaction(conn):
        latest = conn.execute(
            f"SELECT {_COLUMNS} FROM config_revisions WHERE repository = ? AND model = ? "
            "ORDER BY number DESC LIMIT 1", (_key(repository), model)).fetchone()
        if latest is not None and latest[2] == sha:
            return _revision(latest)
        number = int(latest[0]) + 1 if latest else 1
        at = db.format_time(db.utc_now())
        conn.execute(
            "INSERT INTO config_revisions (repository, model, number, at, sha256, content, who, note) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (_key(repository), model, number, at, sha, data, who, note))
    return Revision(number, db.parse_time(at), sha, who, note, data)


def history(repository: Path, model: str, *, home: Path | None = None) -> list[Revision]:
    """Every kept revision of the model's config, newest first."""
    with db.connect(home) as conn:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM config_revisions WHERE repository = ? AND model = ? "
            "ORDER BY number DESC", (_key(repository), model)).fetchall()
    return [_revision(row) for row in rows]


def read_revision(repository: Path, model: str, number: int, *, home: Path | None = None) -> Revision:
    with db.connect(home) as conn:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM config_revisions WHERE repository = ? AND model = ? AND number = ?",
            (_key(repository), model, number)).fetchone()
    if row is None:
        raise RepositoryError(f"no revision {number} of {model!r} in the config history; "
                              f"`geadmin config history {model}` lists the kept ones")
    return _revision(row)


def revision_with_hash(repository: Path, model: str, sha256: str,
                       home: Path | None = None) -> Revision | None:
    with db.connect(home) as conn:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM config_revisions WHERE repository = ? AND model = ? AND sha256 = ? "
            "ORDER BY number DESC LIMIT 1", (_key(repository), model, sha256)).fetchone()
    return _revision(row) if row else None


def rollback_target(repository: Path, model: str, revision: int | None, current_sha256: str, *,
                    home: Path | None = None) -> Revision:
    """The revision a rollback applies: `revision`, else the newest that differs from disk."""
    if revision is not None:
        return read_revision(repository, model, revision, home=home)
    return previous_revision(repository, model, current_sha256, home=home)


def previous_revision(repository: Path, model: str, current_sha256: str, *,
                      home: Path | None = None) -> Revision:
    kept = history(repository, model, home=home)
    earlier = next((r for r in kept if r.sha256 != current_sha256), None)
    if earlier is None:
        raise RepositoryError(
            f"no earlier revision of {model!r} to roll back to: the config history holds "
            f"{len(kept)} revision(s), none different from the file on disk (revisions are kept "
            f"when geadmin applies a change)")
    return earlier


def last_good_config(repository: Path, model: str, *, home: Path | None = None) -> ModelConfig | None:
    """The model's last config that parses: the file on disk, else the newest kept revision
    that does; None when there is none (or the history cannot be read)."""
    try:
        return parse_pbtxt(read_config_text(Path(repository) / model / CONFIG_FILE))
    except (RepositoryError, ConfigParseError):
        pass
    try:
        kept = history(repository, model, home=home)
    except WorkspaceDatabaseError:
        return None
    for revision in kept:
        try:
            return parse_pbtxt(revision.text)
        except ConfigParseError:
            continue
    return None


def text_diff(before: str, after: str, name: str, before_label: str, after_label: str) -> str:
    """A unified diff (difflib); a missing final newline is marked as diff(1) does."""
    lines = difflib.unified_diff(_lines(before), _lines(after), fromfile=f"{name} ({before_label})",
                                 tofile=f"{name} ({after_label})")
    return "".join(lines)


def config_diff(before: bytes, after: bytes, model: str, before_label: str = "before",
                after_label: str = "after") -> str:
    return text_diff(before.decode("utf-8", errors="replace"), after.decode("utf-8", errors="replace"),
                     f"{model}/{CONFIG_FILE}", before_label, after_label)


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines
