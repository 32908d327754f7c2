"""Secrets at rest: secret files are 0600 before they are renamed into place (whatever the
umask), the workspace and its logs are 0700/0600, the first admin's password never reaches
a log, and uploaded code (model.py, shared libraries) is for admins only."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.access.bootstrap import PASSWORD_FILE, create_first_admin
from geadmin.access.roles import REQUIRED_ROLE, GuardedAction, Role
from geadmin.access.users import UsersFile
from geadmin.errors import AccessDeniedError
from geadmin.ops.models import create, create_plan
from geadmin.ops.models.create import create_model
from geadmin.repository import atomic
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import Workspace
from tests.support.auth import admin_auth, auth_as

PASSWORD = "correct horse battery"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The laxest umask: any mode below comes from the code, not from the environment."""
    previous = os.umask(0)
    yield
    os.umask(previous)


@pytest.fixture
def renames(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every rename into place, with the mode the file had at that moment (the real rename runs)."""
    seen: list[tuple[str, int]] = []
    real: Callable[..., None] = os.replace

    def replace(source: str | Path, destination: str | Path, **at: int) -> None:
        # atomic_write renames within its directory's handle (src_dir_fd / dst_dir_fd)
        seen.append((Path(destination).name,
                     stat.S_IMODE(os.stat(source, dir_fd=at.get("src_dir_fd")).st_mode)))
        real(source, destination, **at)

    monkeypatch.setattr(atomic.os, "replace", replace)
    return seen


def test_a_secret_is_0600_before_it_is_renamed_into_place(tmp_path: Path, open_umask: None,
                                                          renames: list[tuple[str, int]]) -> None:
    target = tmp_path / "key"
    atomic.write_secret_atomically(target, b"s3cret\n")
    assert renames == [("key", 0o600)] and mode(target) == 0o600
    target.chmod(0o644)  # an older file someone made readable
    atomic.write_secret_atomically(target, b"new\n")
    assert renames[-1] == ("key", 0o600) and mode(target) == 0o600 and target.read_bytes() == b"new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["key"]  # no temp file left


def test_the_users_file_is_never_readable_by_others_not_even_for_a_moment(
        tmp_path: Path, open_umask: None, renames: list[tuple[str, int]]) -> None:
    users = UsersFile(tmp_path / "conf" / "users.toml")
    users.add("alice", Role.OPERATOR, PASSWORD, auth=admin_auth())
    users.set_role("alice", Role.ADMIN, auth=admin_auth())
    assert renames == [("users.toml", 0o600), ("users.toml", 0o600)]
    assert mode(users.path) == 0o600 and mode(users.path.parent) == 0o700


def test_the_first_admin_password_file_is_private_and_the_log_line_names_it_only(
        tmp_path: Path, open_umask: None, renames: list[tuple[str, int]]) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)  # as the dashboard image's Dockerfile makes /var/lib/geadmin
    first = create_first_admin(UsersFile(home / "users.toml"), home)
    assert first is not None
    assert (PASSWORD_FILE, 0o600) in renames and ("users.toml", 0o600) in renames
    assert mode(home / PASSWORD_FILE) == 0o600 and mode(home) == 0o700
    line = first.announcement()
    assert first.password not in line and str(home / PASSWORD_FILE) in line


def test_the_workspace_and_its_logs_directory_are_private(tmp_path: Path, open_umask: None) -> None:
    fresh = Workspace(tmp_path / "fresh")
    fresh.ensure()
    assert mode(fresh.home) == 0o700 and mode(fresh.logs) == 0o700
    older = Workspace(tmp_path / "older")  # made by an earlier geadmin, readable by all
    older.logs.mkdir(parents=True, mode=0o755)
    older.home.chmod(0o755)
    older.ensure()
    assert mode(older.home) == 0o700 and mode(older.logs) == 0o700
    older.ensure_admin_key()
    assert mode(older.admin_key_file) == 0o600


def test_logs_are_opened_0600_and_an_older_log_is_closed_up(tmp_path: Path, open_umask: None) -> None:
    new_log = tmp_path / "new.log"
    with atomic.open_private_log(new_log) as log:
        log.write(b"one\n")
    assert mode(new_log) == 0o600
    old_log = tmp_path / "old.log"
    old_log.write_bytes(b"kept\n")
    old_log.chmod(0o644)
    with atomic.open_private_log(old_log) as log:
        log.write(b"appended\n")
    assert mode(old_log) == 0o600 and old_log.read_bytes() == b"kept\nappended\n"


def test_tritons_log_is_private(triton_factory: Callable[..., TritonProcess], open_umask: None) -> None:
    triton = triton_factory(models=[])
    assert mode(triton.log_path) == 0o600 and triton.log_path.stat().st_size > 0


# -- uploaded code is for admins ------------------------------------------------------------
@pytest.mark.parametrize(("paths", "code"), [
    (["1/model.py"], ["1/model.py"]),
    (["1/helpers.PY", "1/model.om"], ["1/helpers.PY"]),
    (["1/libtriton_custom.so", "1/libops.so.1", "1/cache.pyc"],
     ["1/cache.pyc", "1/libops.so.1", "1/libtriton_custom.so"]),
    (["1/model.onnx", "1/labels.txt", "1/model.om", "1/sonar.bin"], []),
])
def test_code_files_are_python_and_shared_libraries(paths: list[str], code: list[str]) -> None:
    assert create_plan.code_files(paths) == code


def test_uploading_model_py_needs_the_admin_role(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("GEADMIN_HOME", str(home))
    repo = tmp_path / "repo"
    repo.mkdir()
    assert REQUIRED_ROLE[GuardedAction.UPLOAD_CODE] is Role.ADMIN
    own_code = {"1/model.py": b"import os\nos.system('id')\n"}
    operator = auth_as("olga", Role.OPERATOR)
    for allowed in (None, False):  # not said: a dashboard actor may not; said no: may not
        with pytest.raises(AccessDeniedError, match=r"1/model\.py would run as Triton's user.*admin role"):
            create_model(None, repo, "mine", "python", files=own_code, auth=operator,
                         may_upload_code=allowed, load=False)
    assert list(repo.iterdir()) == []
    refusals = [r for r in audit.query(home=home) if r.action == "create"]
    assert [(r.who, r.result) for r in refusals] == [("olga", "refused")] * 2
    assert "admin" in create.next_step(AccessDeniedError("x"))
    # The template's own identity model.py is no upload: an operator may create it.
    assert create_model(None, repo, "echo", "python", auth=operator, load=False).ok
    # An admin (the guard said yes), and the CLI's OS user, may upload code.
    admin = create_model(None, repo, "admins", "python", files=own_code, auth=auth_as("ada"),
                         may_upload_code=True, load=False)
    cli = create_model(None, repo, "from_cli", "python", files=own_code, auth=admin_auth(),
                       load=False)
    assert admin.ok and cli.ok and (repo / "admins" / "1" / "model.py").read_bytes() == own_code["1/model.py"]
