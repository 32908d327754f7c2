"""The users file is trusted only when nobody else can have written it, hashes follow argon2's
parameters, and a password is changed by its owner or reset by whoever may manage users."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from argon2 import PasswordHasher

from geadmin.access import bootstrap
from geadmin.access.roles import Role
from geadmin.access.users import User, UsersFile
from geadmin.cli.main import main
from geadmin.errors import ConfigError, NotAuthorizedError, RepositoryError
from tests.support.auth import admin_auth, auth_as, viewer_auth

PASSWORD = "correct horse battery"


@pytest.fixture
def users(tmp_path: Path) -> UsersFile:
    file = UsersFile(tmp_path / "users.toml")
    file.add("alice", Role.OPERATOR, PASSWORD, auth=admin_auth())
    return file


@pytest.mark.parametrize("mode", [0o666, 0o620, 0o602])
def test_a_users_file_others_can_write_is_refused_with_the_chmod(users: UsersFile, mode: int) -> None:
    users.path.chmod(mode)
    with pytest.raises(ConfigError, match=f"writable by others .*`chmod 600 {users.path}`"):
        users.load()


def test_a_read_only_users_file_others_can_read_is_accepted(users: UsersFile) -> None:
    users.path.chmod(0o444)  # a Kubernetes ConfigMap or Secret mount: 0644 or 0444, nobody writes
    assert set(users.load()) == {"alice"}


def test_a_users_file_linked_out_of_its_directory_is_refused(users: UsersFile, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = elsewhere / "users.toml"
    link.symlink_to(users.path)
    with pytest.raises(ConfigError, match=r"links out of its directory.*not a link"):
        UsersFile(link).load()


def test_a_configmap_style_link_inside_its_directory_is_followed(users: UsersFile, tmp_path: Path) -> None:
    mount = tmp_path / "mount"
    (mount / "..2026_12_07").mkdir(parents=True)
    users.path.rename(mount / "..2026_12_07" / "users.toml")
    (mount / "..data").symlink_to("..2026_12_07")
    (mount / "users.toml").symlink_to("..data/users.toml")
    assert set(UsersFile(mount / "users.toml").load()) == {"alice"}


def test_a_users_file_owned_by_someone_else_is_refused(users: UsersFile,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        os.chown(users.path, 4242, -1)  # root's own files are trusted, another user's are not
    else:
        monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 4242)
    with pytest.raises(ConfigError, match=r"owned by uid .*, who could add an admin"):
        users.load()


def test_a_hash_with_old_parameters_is_replaced_at_the_next_sign_in(users: UsersFile) -> None:
    weak = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash(PASSWORD)
    with users.changing() as table:
        table["alice"] = User("alice", Role.OPERATOR, weak)
    signed_in = users.verify("alice", PASSWORD)
    stored = users.load()["alice"].password_hash
    assert stored != weak and "m=65536" in stored and signed_in.password_hash == stored
    assert users.verify("alice", PASSWORD).password_hash == stored  # once


def test_a_read_only_users_file_keeps_its_old_hash_and_signs_in(users: UsersFile,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    weak = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash(PASSWORD)
    with users.changing() as table:
        table["alice"] = User("alice", Role.OPERATOR, weak)

    def read_only(path: Path, data: bytes) -> None:
        raise RepositoryError(f"cannot write {path}: Read-only file system")

    monkeypatch.setattr("geadmin.access.users.write_secret_atomically", read_only)
    assert users.verify("alice", PASSWORD).password_hash == weak


def test_set_password_needs_users_unless_it_is_the_users_own(users: UsersFile) -> None:
    with pytest.raises(NotAuthorizedError):
        users.set_password("alice", "mallory's new password")
    with pytest.raises(NotAuthorizedError):
        users.set_password("alice", "mallory's new password", auth=viewer_auth("vera"))
    assert users.set_password("alice", "her very own password",
                              auth=auth_as("alice", Role.OPERATOR)).must_change is False
    assert users.verify("alice", "her very own password").name == "alice"


def test_a_reset_by_an_admin_must_be_changed_at_the_next_sign_in(users: UsersFile, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    assert users.set_password("alice", "known to the admin", auth=auth_as("ada")).must_change is True
    monkeypatch.setenv("GEADMIN_USERS_FILE", str(users.path))
    monkeypatch.setattr("sys.stdin", io.StringIO("known to the cli user\n"))
    users.set_password("alice", "her very own password", auth=auth_as("alice", Role.OPERATOR))
    assert main(["users", "passwd", "alice", "--password-stdin"]) == 0
    assert users.verify("alice", "known to the cli user").must_change is True


def test_only_the_first_admin_changing_theirs_deletes_the_first_password(tmp_path: Path) -> None:
    users = UsersFile(tmp_path / "users.toml")
    first = bootstrap.create_first_admin(users, tmp_path)
    assert first is not None
    bootstrap.forget_first_password(tmp_path, "alice")
    assert first.password_file.exists()
    bootstrap.forget_first_password(tmp_path, bootstrap.FIRST_ADMIN)
    assert not first.password_file.exists()
