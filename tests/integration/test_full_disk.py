"""A full disk, for real: a small ext4 image loop-mounted (the tests run as root here) holds a
real tritonserver's model repository and a workspace; it is filled, then geadmin is asked to
change things there. Nothing is half-written, Triton keeps serving the old config, and every
message names the full filesystem and its free space — not "check permissions", not "the
disk failed or NFS" (SQLite says "disk I/O error" when it cannot grow its shared memory)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from geadmin import audit, db
from geadmin.errors import RepositoryError
from geadmin.ops.models.apply import apply_config
from geadmin.repository import locks, store
from geadmin.repository.atomic import atomic_write
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.auth import admin_auth
from tests.support.processes import TEST_EXIT_TIMEOUT_S
from tests.support.samples import copy_samples

MODEL = "digits_classifier"
IMAGE_MIB = 24


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh ext4 of IMAGE_MIB, loop-mounted; unmounted afterwards."""
    assert os.geteuid() == 0, "this test mounts a filesystem: it needs root (the machine's tests run as root)"
    mkfs = shutil.which("mkfs.ext4") or "/sbin/mkfs.ext4"
    assert Path(mkfs).exists(), "mkfs.ext4 missing: apt-get install -y e2fsprogs"
    image, mount = tmp_path / "disk.img", tmp_path / "mnt"
    with image.open("wb") as handle:
        handle.truncate(IMAGE_MIB << 20)
    subprocess.run([mkfs, "-q", "-F", str(image)], check=True)
    mount.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(mount: Path) -> None:
    """Write until the filesystem refuses one more byte (root's reserved blocks too)."""
    chunk = 1 << 20
    with (mount / "filler").open("wb", buffering=0) as handle:
        while chunk >= 1:
            try:
                handle.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                chunk //= 2


def test_an_apply_on_a_full_repository_disk_writes_nothing_and_says_the_disk_is_full(
        small_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))  # the workspace has room
    repository = copy_samples(small_disk / "model_repository")
    server = TritonProcess(repository, models=[MODEL], log_path=tmp_path / "tritonserver.log",
                           exit_timeout_s=TEST_EXIT_TIMEOUT_S)
    server.start()
    try:
        path = repository / MODEL / "config.pbtxt"
        original = path.read_bytes()
        opened = store.read_config(repository, MODEL)
        fill(small_disk)
        changed = original.replace(b"max_queue_delay_microseconds: 1000",
                                   b"max_queue_delay_microseconds: 2500")
        with TritonClient(server.http_url, load_timeout_s=60) as client:
            with pytest.raises(RepositoryError) as refused:
                apply_config(client, repository, MODEL, changed, expected_sha256=opened.sha256,
                             auth=admin_auth())
            assert f"the filesystem of {repository / MODEL} is full (" in str(refused.value)
            assert "the previous file is untouched" in str(refused.value)
            assert path.read_bytes() == original
            assert sorted(p.name for p in path.parent.iterdir()) == ["1", "config.pbtxt"]  # no temp file
            assert client.model_ready(MODEL)
            assert client.model_config(MODEL).dynamic_batching.max_queue_delay_microseconds == 1000
        rows = audit.query(model=MODEL)
        assert rows[0].result == "refused" and "is full (" in rows[0].message, rows[0]
    finally:
        server.stop()


def test_a_full_workspace_disk_is_named_by_the_database_the_locks_and_the_writes(
        small_disk: Path) -> None:
    home = small_disk / "home"
    audit.record("apply", "m", audit.Result.OK, home=home)  # a workspace in use, then the disk fills
    fill(small_disk)
    assert f"the filesystem of {home} is full (" in db.unreadable(home)
    with pytest.raises(RepositoryError, match=r"cannot create the lock .* is full \("), \
            locks.file_lock(home / "locks" / "m.apply.lock", "an apply of 'm'"):
        pass
    with pytest.raises(RepositoryError, match=r"the previous file is untouched — the filesystem of .* full"):
        atomic_write(home / "secret", b"x" * 8192)
