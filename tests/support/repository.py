"""A model repository put back exactly as it was: for tests that share one tritonserver and
change its repository (apply, rollback), so the next test starts from the same files."""

from __future__ import annotations

import shutil
from pathlib import Path


def snapshot(repository: Path) -> dict[Path, bytes]:
    """Every file under `repository` (relative path -> bytes)."""
    return {p.relative_to(repository): p.read_bytes() for p in repository.rglob("*") if p.is_file()}


def restore(repository: Path, files: dict[Path, bytes]) -> None:
    """Make `repository` hold exactly `files`: new files and directories go, changed ones are
    rewritten, removed ones come back."""
    for path in sorted(repository.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        relative = path.relative_to(repository)
        if path.is_file() and relative not in files:
            path.unlink()
        elif path.is_dir() and not any(f.parts[:len(relative.parts)] == relative.parts for f in files):
            shutil.rmtree(path)
    for relative, data in files.items():
        target = repository / relative
        if not target.is_file() or target.read_bytes() != data:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
