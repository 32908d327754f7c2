"""A model repository put back exactly as it was: for tests that share one tritonserver and
change its repository (apply, rollback), so the next test starts from the same files."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from geadmin.domain import ModelState
from geadmin.ops.models.actions import wait_settled
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient


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


def put_back(server: TritonProcess, files: dict[Path, bytes], loaded: Sequence[str],
             timeout_s: float = 60) -> None:
    """A shared server as it was before a test: its repository holds exactly `files`, the
    models in `loaded` are (re)loaded from them and READY, and no other model is loaded."""
    restore(server.repository, files)
    with TritonClient(server.http_url, load_timeout_s=timeout_s) as triton:
        others = [e.name for e in triton.repository_index()
                  if e.name not in loaded and e.state is ModelState.READY]
        for name in others:
            triton.unload(name)
        for name in loaded:
            triton.load(name)
        assert wait_settled(triton, [*loaded, *others], timeout_s)
        states = {e.name: e.state for e in triton.repository_index()}
    assert all(states.get(n) is ModelState.READY for n in loaded), states
    assert not [n for n in others if states.get(n) is ModelState.READY], states
