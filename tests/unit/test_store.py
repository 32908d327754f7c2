"""Writing to the model repository: atomic writes (and failures injected mid-write), backups
as revisions, conflict detection, locks, and the safe-path gate for user-given names."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from geadmin.errors import ConfigConflictError, ConfigLockedError, RepositoryError
from geadmin.repository import atomic, locks, paths, revisions, store
from geadmin.repository.modelconfig import MAX_CONFIG_BYTES, read_config_bytes
from geadmin.repository.paths import safe_model_path
from geadmin.repository.store import ABSENT
from geadmin.repository.validate import Severity, validate_model

CONFIG = b'# keep this comment\nname: "m"\nbackend: "python"\nmax_batch_size: 8\n'
EDITED = CONFIG.replace(b"max_batch_size: 8", b"max_batch_size: 16")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repository = tmp_path / "repo"
    (repository / "m" / "1").mkdir(parents=True)
    (repository / "m" / "config.pbtxt").write_bytes(CONFIG)
    return repository


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# -- reading and writing ----------------------------------------------------------------
def test_read_config_returns_the_exact_bytes_and_their_hash(repo: Path) -> None:
    config = store.read_config(repo, "m")
    assert config.data == CONFIG and config.sha256 == revisions.sha256_of(CONFIG) and len(config.sha256) == 64
    assert config.path == (repo / "m" / "config.pbtxt").resolve()


def test_read_config_of_a_missing_model_names_the_directory(repo: Path) -> None:
    with pytest.raises(RepositoryError, match=r"no config\.pbtxt in .*nope"):
        store.read_config(repo, "nope")


def test_write_config_replaces_the_file_keeps_its_mode_and_backs_up_the_old_bytes(
    repo: Path, home: Path
) -> None:
    path = repo / "m" / "config.pbtxt"
    path.chmod(0o640)
    before = store.write_config(repo, "m", EDITED, expected_sha256=revisions.sha256_of(CONFIG), who="ann",
                                home=home)
    assert before is not None and before.data == CONFIG
    assert path.read_bytes() == EDITED
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert listing(path.parent) == ["1", "config.pbtxt"]  # no temp file, no backup next to it
    (revision,) = revisions.history(repo, "m", home=home)
    assert (revision.number, revision.data, revision.who) == (1, CONFIG, "ann")
    assert revision.sha256 == revisions.sha256_of(CONFIG)


def test_a_new_file_is_readable_by_others(tmp_path: Path) -> None:
    target = tmp_path / "new.pbtxt"
    atomic.atomic_write(target, b"x")
    assert stat.S_IMODE(target.stat().st_mode) == atomic.NEW_FILE_MODE


@pytest.mark.parametrize("failing", ["replace", "fsync", "fchmod"])
def test_a_failure_between_write_and_rename_leaves_the_original_and_no_temp_file(
    repo: Path, home: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    path = repo / "m" / "config.pbtxt"

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, failing, broken)
    with pytest.raises(RepositoryError, match="No space left on device; the previous file is untouched"):
        store.write_config(repo, "m", EDITED, expected_sha256=revisions.sha256_of(CONFIG), who="ann",
                           home=home)
    monkeypatch.undo()
    assert path.read_bytes() == CONFIG
    assert listing(path.parent) == ["1", "config.pbtxt"]


def test_a_directory_fsync_failure_after_the_rename_says_the_new_file_is_written(
    repo: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(directory: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(atomic, "_fsync_handle", broken)  # the directory's, after the rename
    with pytest.raises(RepositoryError, match=r"config\.pbtxt IS written .* directory fsync failed "
                       r"\(Input/output error\)") as info:
        store.write_config(repo, "m", EDITED, expected_sha256=revisions.sha256_of(CONFIG), who="ann",
                           home=home)
    assert "untouched" not in str(info.value)
    assert (repo / "m" / "config.pbtxt").read_bytes() == EDITED
    assert listing(repo / "m") == ["1", "config.pbtxt"]


def test_a_config_larger_than_a_config_can_be_read_is_never_written(repo: Path, home: Path) -> None:
    huge = CONFIG + b"#" * MAX_CONFIG_BYTES
    with pytest.raises(RepositoryError, match=r"more than a config can be \(4,194,304 bytes, 4 MiB\): "
                       "nothing was written"):
        store.write_config(repo, "m", huge, expected_sha256=revisions.sha256_of(CONFIG), who="ann", home=home)
    assert (repo / "m" / "config.pbtxt").read_bytes() == CONFIG
    assert revisions.history(repo, "m", home=home) == []
    with pytest.raises(RepositoryError, match="more than a config can be"):  # a new model's, staged
        store.write_model_file(repo, "n", "config.pbtxt", huge, limit_bytes=len(huge))
    assert not (repo / "n" / "config.pbtxt").exists()
    store.write_model_file(repo, "n", "1/model.bin", huge, limit_bytes=len(huge))  # other files: their limit


def test_a_write_into_a_missing_directory_fails_cleanly(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match="cannot write"):
        atomic.atomic_write(tmp_path / "no" / "such" / "file", b"x")


# -- conflicts ----------------------------------------------------------------------------
def test_a_file_changed_since_it_was_read_is_a_conflict_with_both_texts(repo: Path, home: Path) -> None:
    opened = store.read_config(repo, "m")
    colleague = CONFIG.replace(b"max_batch_size: 8", b"max_batch_size: 4")
    store.write_config(repo, "m", colleague, expected_sha256=opened.sha256, who="bob", home=home)
    refused = r"changed since you opened it.*nothing was written"
    with pytest.raises(ConfigConflictError, match=refused) as info:
        store.write_config(repo, "m", EDITED, expected_sha256=opened.sha256, who="ann", home=home)
    conflict = info.value
    assert (repo / "m" / "config.pbtxt").read_bytes() == colleague
    assert conflict.disk_text == colleague.decode()
    assert conflict.base_text == CONFIG.decode()  # found in the history by its hash
    assert conflict.found_sha256 == revisions.sha256_of(colleague)
    assert "-max_batch_size: 8" in conflict.diff() and "+max_batch_size: 4" in conflict.diff()


def test_creating_a_config_expects_none_and_refuses_to_overwrite_one(repo: Path, home: Path) -> None:
    (repo / "fresh").mkdir()
    assert store.write_config(repo, "fresh", CONFIG, expected_sha256=ABSENT, who="ann", home=home) is None
    assert store.read_config(repo, "fresh").data == CONFIG
    with pytest.raises(ConfigConflictError, match="it had sha256 \\(none\\)"):
        store.write_config(repo, "fresh", EDITED, expected_sha256=ABSENT, who="ann", home=home)


def test_a_second_writer_waits_for_the_lock_then_is_refused(repo: Path, home: Path) -> None:
    with locks.edit_lock(repo, "m", "apply", home=home):
        with pytest.raises(ConfigLockedError, match="wait for it to finish"), \
                locks.edit_lock(repo, "m", "apply", home=home, wait_s=0.1):
            pass
        with locks.edit_lock(repo, "other", "apply", home=home, wait_s=0):
            pass  # another model's lock is free
    with locks.edit_lock(repo, "m", "apply", home=home, wait_s=0):
        pass  # released
    assert not (repo / "m" / ".lock").exists() and (home / "locks").is_dir()  # locks live in the workspace


# -- history ------------------------------------------------------------------------------
def test_revisions_are_numbered_per_model_deduplicated_and_read_back_exactly(repo: Path, home: Path) -> None:
    crlf = b"name: \"m\"\r\nmax_batch_size: 2"  # no final newline, CRLF: kept byte for byte
    for data in (CONFIG, CONFIG, EDITED, crlf):
        revisions.record_revision(repo, "m", data, who="ann", note="n", home=home)
    revisions.record_revision(repo, "other", CONFIG, who="bob", home=home)
    assert [r.number for r in revisions.history(repo, "m", home=home)] == [3, 2, 1]
    assert revisions.read_revision(repo, "m", 3, home=home).data == crlf
    assert [r.number for r in revisions.history(repo, "other", home=home)] == [1]
    found = revisions.revision_with_hash(repo, "m", revisions.sha256_of(EDITED), home)
    assert found is not None and found.number == 2
    with pytest.raises(RepositoryError, match=r"no revision 9 of 'm'.*config history m"):
        revisions.read_revision(repo, "m", 9, home=home)


def test_the_history_of_one_repository_is_not_another_s(repo: Path, tmp_path: Path, home: Path) -> None:
    revisions.record_revision(repo, "m", CONFIG, who="ann", home=home)
    assert revisions.history(tmp_path / "elsewhere", "m", home=home) == []


def test_diffs_mark_a_missing_final_newline() -> None:
    diff = revisions.config_diff(b"a\nb", b"a\nc\n", "m")
    assert diff.startswith("--- m/config.pbtxt (before)\n+++ m/config.pbtxt (after)\n")
    assert "-b\n\\ No newline at end of file\n+c\n" in diff


# -- the safe-path gate -------------------------------------------------------------------
@pytest.mark.parametrize("model", ["", ".", "..", "a/b", "../m", "/etc", "a\\b", "m\0"])
def test_model_names_that_are_not_one_directory_are_refused(repo: Path, model: str) -> None:
    with pytest.raises(RepositoryError, match="refused model name"):
        safe_model_path(repo, model, "config.pbtxt")


@pytest.mark.parametrize(("relative", "why"), [
    ("../other/config.pbtxt", r"'\.\.' would leave"),
    ("1/../../x", r"'\.\.' would leave"),
    ("..", r"'\.\.' would leave"),
    ("/etc/passwd", "absolute paths are not allowed"),
    ("//etc/passwd", "absolute paths are not allowed"),
    ("1\\..\\..\\x", "backslash"),
    ("1/model\0.py", "NUL"),
])
def test_traversal_and_absolute_paths_are_refused(repo: Path, relative: str, why: str) -> None:
    with pytest.raises(RepositoryError, match=why):
        safe_model_path(repo, "m", relative)


def test_a_symlinked_model_directory_is_refused(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (repo / "linked").symlink_to(tmp_path / "outside")
    with pytest.raises(RepositoryError, match="symbolic link"):
        safe_model_path(repo, "linked", "config.pbtxt")


def test_a_symlink_anywhere_below_the_model_is_refused(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (repo / "m" / "2").symlink_to(tmp_path / "outside")
    (repo / "m" / "1" / "model.py").symlink_to(tmp_path / "outside" / "evil.py")
    for relative in ("2/model.py", "1/model.py"):
        with pytest.raises(RepositoryError, match="symbolic link"):
            safe_model_path(repo, "m", relative)


def test_a_symlinked_config_is_never_written_through(repo: Path, tmp_path: Path, home: Path) -> None:
    real = tmp_path / "real.pbtxt"
    real.write_bytes(CONFIG)
    (repo / "m" / "config.pbtxt").unlink()
    (repo / "m" / "config.pbtxt").symlink_to(real)
    with pytest.raises(RepositoryError, match="symbolic link"):
        store.write_config(repo, "m", EDITED, expected_sha256=revisions.sha256_of(CONFIG), who="ann",
                           home=home)
    assert real.read_bytes() == CONFIG


def test_a_model_directory_swapped_for_a_link_after_the_check_is_never_written_through(
        repo: Path, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whoever can write the repository swaps the model directory for a link to a directory of
    someone else's between geadmin's path check and its write (a reviewer's race wrote 36 of 300
    configs outside): the write goes one name at a time from the repository, never through a link."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.pbtxt").write_bytes(b"theirs")
    checked = paths.safe_model_path
    swaps: list[Path] = []

    def swap_after_the_check(repository: Path, model: str, relative: str = "") -> Path:
        path = checked(repository, model, relative)
        if not (repo / "m").is_symlink():
            swaps.append(tmp_path / f"m.moved{len(swaps)}")
            (repo / "m").rename(swaps[-1])
            (repo / "m").symlink_to(outside, target_is_directory=True)
        return path

    monkeypatch.setattr(store, "config_path", lambda r, m: swap_after_the_check(r, m, "config.pbtxt"))
    monkeypatch.setattr(store, "_on_disk", lambda path: CONFIG)  # as read before the swap
    with pytest.raises(RepositoryError, match=r"a directory on its way is a symbolic link .* nothing was "
                       "written"):
        store.write_config(repo, "m", EDITED, expected_sha256=revisions.sha256_of(CONFIG), who="ann",
                           home=home)
    assert listing(outside) == ["config.pbtxt"] and (outside / "config.pbtxt").read_bytes() == b"theirs"

    (repo / "m").unlink()
    (repo / "m").mkdir()
    monkeypatch.setattr(store, "safe_model_path", swap_after_the_check)
    with pytest.raises(RepositoryError, match="a directory on its way is a symbolic link"):
        store.write_model_file(repo, "m", "1/model.py", b"print('x')")
    assert listing(outside) == ["config.pbtxt"]  # no directory made there, no file


def test_safe_paths_stay_inside_and_a_symlinked_repository_root_is_fine(repo: Path, tmp_path: Path) -> None:
    link = tmp_path / "repo-link"
    link.symlink_to(repo)
    path = safe_model_path(link, "m", "1/./sub/model.om")
    assert path == repo.resolve() / "m" / "1" / "sub" / "model.om"
    assert safe_model_path(repo, "m") == repo.resolve() / "m"


def test_a_missing_repository_is_named(tmp_path: Path) -> None:
    with pytest.raises(RepositoryError, match=r"does not exist.*--repository"):
        safe_model_path(tmp_path / "nowhere", "m", "config.pbtxt")


# -- uploads ------------------------------------------------------------------------------
def test_an_oversize_upload_is_refused_before_anything_is_written(repo: Path) -> None:
    with pytest.raises(RepositoryError, match=r"refused '1/model.om': it is 2.0 KiB, over the upload limit "
                       r"of 1.0 KiB"):
        store.write_model_file(repo, "m", "1/model.om", b"x" * 2048, limit_bytes=1024)
    assert not (repo / "m" / "1" / "model.om").exists()
    paths.check_upload_size("ok", 1024, 1024)


def test_an_upload_is_written_atomically_at_a_checked_path(repo: Path) -> None:
    path = store.write_model_file(repo, "m", "2/model.om", b"\x00om", limit_bytes=1024)
    assert path.read_bytes() == b"\x00om" and path.parent.name == "2"
    with pytest.raises(RepositoryError, match="would leave"):
        store.write_model_file(repo, "m", "../../escape", b"x")
    assert listing(repo.parent) == ["repo"]


# -- the one reader of config.pbtxt: what a repository writer may not make geadmin read ------
def _model(tmp_path: Path) -> Path:
    directory = tmp_path / "repo" / "m"
    (directory / "1").mkdir(parents=True)
    return directory


def test_a_config_linked_out_of_its_model_directory_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("zeus:$6$hash:19000:0:99999:7:::\n")
    directory = _model(tmp_path)
    (directory / "config.pbtxt").symlink_to(secret)
    with pytest.raises(RepositoryError, match=r"links out of its model directory \(to .*shadow\)"):
        read_config_bytes(directory / "config.pbtxt")
    with pytest.raises(RepositoryError, match="is a symbolic link, and geadmin never writes through one"):
        store.read_config(tmp_path / "repo", "m")  # opened for a change: never a link
    report = validate_model(directory)
    assert "zeus" not in report.findings[0].message  # the parser never saw the file's first word


def test_a_config_linked_inside_its_directory_is_read_as_a_configmap_mounts_it(tmp_path: Path) -> None:
    """Read (validated, bundled); opened for a change it is refused, as every link is."""
    directory = _model(tmp_path)
    (directory / "1" / "model.py").write_text("# the model\n")
    (directory / "..2026_12_07").mkdir()
    (directory / "..2026_12_07" / "config.pbtxt").write_text('name: "m"\nbackend: "python"\n')
    (directory / "..data").symlink_to("..2026_12_07")
    (directory / "config.pbtxt").symlink_to("..data/config.pbtxt")
    assert read_config_bytes(directory / "config.pbtxt") == b'name: "m"\nbackend: "python"\n'
    assert validate_model(directory).count(Severity.ERROR) == 0


def test_a_fifo_a_device_and_a_huge_file_are_refused_without_waiting(tmp_path: Path) -> None:
    directory = _model(tmp_path)
    os.mkfifo(directory / "config.pbtxt")  # no writer: a plain open would wait for ever
    with pytest.raises(RepositoryError, match="is not a regular file"):
        read_config_bytes(directory / "config.pbtxt")
    (directory / "config.pbtxt").unlink()
    with (directory / "config.pbtxt").open("wb") as handle:
        handle.truncate(MAX_CONFIG_BYTES + 1)
    with pytest.raises(RepositoryError, match=r"more than a config can be \(4 MiB\)"):
        read_config_bytes(directory / "config.pbtxt")
    (directory / "config.pbtxt").unlink()
    with pytest.raises(FileNotFoundError):
        read_config_bytes(directory / "config.pbtxt")
