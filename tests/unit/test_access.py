"""Access control core: roles, the users file (argon2), rate limiting, sessions, sign-in
modes, OIDC role mapping, the guard and the first-start admin."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.access.bootstrap import PASSWORD_FILE, create_first_admin
from geadmin.access.guard import authorize, permission
from geadmin.access.identity import (
    Identity,
    Mode,
    ModeDecision,
    is_loopback,
    oidc_identity,
    parse_role_map,
    resolve_mode,
    role_from_claims,
)
from geadmin.access.roles import REQUIRED_ROLE, GuardedAction, Role
from geadmin.access.sessions import Session
from geadmin.access.signin import FailedSignIns, sign_in
from geadmin.access.users import UsersFile
from geadmin.cli.main import main
from geadmin.errors import (
    AccessDeniedError,
    ConfigError,
    SessionExpiredError,
    SignInError,
    SignInRateLimitedError,
    UserAccountError,
)
from tests.support.auth import admin_auth

PASSWORD = "correct horse battery"


@pytest.fixture
def users(tmp_path: Path) -> UsersFile:
    return UsersFile(tmp_path / "users.toml")


def test_roles_are_ordered_and_every_action_has_one() -> None:
    assert Role.VIEWER < Role.OPERATOR < Role.ADMIN
    assert set(REQUIRED_ROLE) == set(GuardedAction)
    assert REQUIRED_ROLE[GuardedAction.INFER] is Role.VIEWER
    assert REQUIRED_ROLE[GuardedAction.RESTART] is Role.ADMIN
    with pytest.raises(ValueError, match="use viewer, operator or admin"):
        Role.parse("root")


def test_users_file_keeps_argon2_hashes_only_and_is_private(users: UsersFile) -> None:
    users.add("alice", Role.OPERATOR, PASSWORD, auth=admin_auth())
    text = users.path.read_text()
    assert PASSWORD not in text and "$argon2id$" in text
    assert stat.S_IMODE(users.path.stat().st_mode) == 0o600
    assert users.verify("alice", PASSWORD).role is Role.OPERATOR


def test_a_wrong_password_and_an_unknown_user_get_the_same_message(users: UsersFile) -> None:
    users.add("alice", Role.OPERATOR, PASSWORD, auth=admin_auth())
    with pytest.raises(SignInError) as wrong:
        users.verify("alice", "not the password!!")
    with pytest.raises(SignInError) as unknown:
        users.verify("mallory", PASSWORD)
    assert str(wrong.value) == str(unknown.value) == "unknown user or wrong password"


def test_passwords_names_and_duplicates_are_checked(users: UsersFile) -> None:
    with pytest.raises(UserAccountError, match="at least 12 characters"):
        users.add("alice", Role.VIEWER, "short", auth=admin_auth())
    with pytest.raises(UserAccountError, match="is not a user name"):
        users.add("../alice", Role.VIEWER, PASSWORD, auth=admin_auth())
    users.add("alice", Role.VIEWER, PASSWORD, auth=admin_auth())
    with pytest.raises(UserAccountError, match="exists already"):
        users.add("alice", Role.ADMIN, PASSWORD, auth=admin_auth())


def test_passwd_role_and_remove(users: UsersFile) -> None:
    users.add("bob", Role.VIEWER, PASSWORD, must_change=True, auth=admin_auth())
    assert users.set_password("bob", "another long password", auth=admin_auth()).must_change is True
    with pytest.raises(SignInError):
        users.verify("bob", PASSWORD)
    assert users.set_role("bob", Role.ADMIN, auth=admin_auth()).role is Role.ADMIN
    users.remove("bob", auth=admin_auth())
    assert users.load() == {}
    with pytest.raises(UserAccountError, match="no user 'bob'"):
        users.remove("bob", auth=admin_auth())


def test_a_malformed_users_file_names_the_problem(users: UsersFile) -> None:
    users.path.write_text("[users.alice]\nrole = 'operator'\n")
    with pytest.raises(ConfigError, match=r"'alice' is malformed.*needs role and password_hash"):
        users.load()
    users.path.write_text("[users\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        users.load()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_failed_sign_ins_lock_the_user_out_for_a_while_then_longer(users: UsersFile) -> None:
    users.add("alice", Role.OPERATOR, PASSWORD, auth=admin_auth())
    clock = Clock()
    attempts = FailedSignIns(limit=3, window_s=60, lockout_s=30, clock=clock)
    for _ in range(3):
        with pytest.raises(SignInError):
            sign_in(users, attempts, "alice", "wrong password!!")
    with pytest.raises(SignInRateLimitedError, match="try again in 30 s") as limited:
        sign_in(users, attempts, "alice", PASSWORD)  # even the right password waits
    assert limited.value.retry_after_s == pytest.approx(30)
    with pytest.raises(SignInError) as other:  # other users are not locked out
        sign_in(users, attempts, "carol", "wrong password!!")
    assert not isinstance(other.value, SignInRateLimitedError)
    clock.now += 31
    for _ in range(3):
        with pytest.raises(SignInError):
            sign_in(users, attempts, "alice", "wrong password!!")
    with pytest.raises(SignInRateLimitedError, match="try again in 60 s"):  # doubled
        sign_in(users, attempts, "alice", PASSWORD)
    clock.now += 61
    assert sign_in(users, attempts, "alice", PASSWORD).name == "alice"


def test_a_session_expires_after_the_idle_time() -> None:
    session = Session(Identity("alice", Role.OPERATOR, Mode.LOCAL), last_seen_s=0.0)
    session = session.touched(now_s=100.0, idle_s=300.0)
    assert session.touched(now_s=399.0, idle_s=300.0).last_seen_s == 399.0
    with pytest.raises(SessionExpiredError, match="after 5 minutes without activity"):
        session.touched(now_s=401.0, idle_s=300.0)


@pytest.mark.parametrize(("address", "loopback"), [
    ("127.0.0.1", True), ("::1", True), ("[::1]", True), ("localhost", True), ("127.0.0.2", True),
    ("0.0.0.0", False), ("", False), (None, False), ("10.0.0.5", False), ("example.org", False)])
def test_is_loopback(address: str | None, loopback: bool) -> None:
    assert is_loopback(address) is loopback


@pytest.mark.parametrize(("setting", "address", "users_file", "oidc", "decision"), [
    ("auto", "127.0.0.1", False, False, ModeDecision(Mode.TOKEN)),  # loopback alone: a token, never open
    ("auto", "::1", False, False, ModeDecision(Mode.TOKEN)),
    ("auto", "localhost", False, False, ModeDecision(Mode.TOKEN)),
    ("token", "0.0.0.0", False, False, ModeDecision(Mode.TOKEN)),
    ("TOKEN ", "127.0.0.1", True, False, ModeDecision(Mode.TOKEN)),  # chosen by name: even with users
    ("auto", "0.0.0.0", True, False, ModeDecision(Mode.LOCAL)),
    ("auto", "0.0.0.0", True, True, ModeDecision(Mode.OIDC)),
    ("auto", "127.0.0.1", True, False, ModeDecision(Mode.LOCAL)),
    ("local", "0.0.0.0", False, False, ModeDecision(Mode.LOCAL, bootstrap=True)),
    ("local", "0.0.0.0", True, False, ModeDecision(Mode.LOCAL)),
    ("oidc", "0.0.0.0", False, True, ModeDecision(Mode.OIDC)),
    ("open", "::1", False, False, ModeDecision(Mode.OPEN)),
    ("open", "127.0.0.1", False, False, ModeDecision(Mode.OPEN)),
])
def test_sign_in_mode(setting: str, address: str, users_file: bool, oidc: bool,
                      decision: ModeDecision) -> None:
    found = resolve_mode(setting, address=address, users_file_exists=users_file, oidc_configured=oidc)
    assert found == decision


@pytest.mark.parametrize(("setting", "address", "oidc", "message"), [
    ("auto", "0.0.0.0", False, "with no sign-in configured.*Choose one: \\(1\\) local users.*\\(2\\) OpenID"
     ".*\\(3\\) a token.*GEADMIN_AUTH=token"),
    ("auto", None, False, "listen on every interface"),
    ("open", "0.0.0.0", False, "loopback address only"),
    ("oidc", "127.0.0.1", False, "no \\[auth\\] section"),
    ("ldap", "127.0.0.1", False, "must be auto, local, oidc, token or open"),
])
def test_sign_in_mode_refusals(setting: str, address: str | None, oidc: bool, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_mode(setting, address=address, users_file_exists=False, oidc_configured=oidc)


def test_oidc_roles_come_from_the_highest_mapped_group() -> None:
    mapping = parse_role_map("ml-oncall=operator, platform-admins=admin")
    assert mapping == {"ml-oncall": Role.OPERATOR, "platform-admins": Role.ADMIN}
    claims = {"email": "ann@example.org", "email_verified": True,
              "groups": ["staff", "ml-oncall", "platform-admins"]}
    identity = oidc_identity(claims, "groups", mapping, Role.VIEWER)
    assert (identity.name, identity.role, identity.mode) == ("ann@example.org", Role.ADMIN, Mode.OIDC)
    assert role_from_claims({"groups": "ml-oncall"}, "groups", mapping, None) is Role.OPERATOR
    assert role_from_claims({"groups": ["staff"]}, "groups", mapping, Role.VIEWER) is Role.VIEWER
    with pytest.raises(SignInError, match="no group that GEADMIN_OIDC_ROLE_MAP maps"):
        role_from_claims({"groups": ["staff"]}, "groups", mapping, None)
    with pytest.raises(ConfigError, match="'oops' is not GROUP=ROLE"):
        parse_role_map("oops")
    with pytest.raises(ConfigError, match="is not a role"):
        parse_role_map("g=root")


@pytest.mark.parametrize(("claims", "name"), [
    ({"email": "ann@example.org", "email_verified": True, "sub": "1"}, "ann@example.org"),
    ({"email": "ann@example.org", "email_verified": "true", "sub": "1"}, "ann@example.org"),
    # an address anyone may type into their profile names no one: the stable subject does
    ({"email": "boss@example.org", "email_verified": False, "sub": "eve-7"}, "eve-7"),
    ({"email": "boss@example.org", "preferred_username": "boss", "sub": "eve-7"}, "boss (sub eve-7)"),
    ({"preferred_username": "ann", "sub": "ann"}, "ann"),
])
def test_the_audit_names_an_oidc_user_by_a_verified_email_else_by_the_subject(
        claims: dict[str, object], name: str) -> None:
    identity = oidc_identity({**claims, "groups": ["ml-oncall"]}, "groups", {"ml-oncall": Role.OPERATOR},
                             None)
    assert identity.name == name


def test_an_oidc_login_with_no_usable_name_is_refused() -> None:
    with pytest.raises(SignInError, match="no verified email, preferred_username or sub"):
        oidc_identity({"email": "x@example.org", "groups": ["g"]}, "groups", {"g": Role.VIEWER}, None)


def test_the_guard_refuses_a_viewer_and_audits_it_with_the_name(tmp_path: Path) -> None:
    viewer = Identity("vic", Role.VIEWER, Mode.LOCAL)
    assert permission(viewer, GuardedAction.INFER) == (True, "")
    allowed, reason = permission(viewer, GuardedAction.UNLOAD)
    assert not allowed and "needs the operator role; vic is viewer" in reason
    with pytest.raises(AccessDeniedError, match="needs the operator role"):
        authorize(viewer, GuardedAction.UNLOAD, model="digits", server="http://t:8000", home=tmp_path)
    (row,) = audit.query(home=tmp_path)
    assert (row.who, row.origin, row.action, row.model) == ("vic", "dashboard", "unload", "digits")
    assert row.result == "refused"
    operator = Identity("olga", Role.OPERATOR, Mode.LOCAL)
    assert authorize(operator, GuardedAction.UNLOAD, home=tmp_path).who.name == "olga"
    with pytest.raises(AccessDeniedError, match="needs the admin role"):
        authorize(operator, GuardedAction.RESTART, home=tmp_path)
    must_change = Identity("admin", Role.ADMIN, Mode.LOCAL, must_change=True)
    assert permission(must_change, GuardedAction.INFER) == (False, "set a new password first (sidebar)")


def test_first_start_creates_one_admin_who_must_change_the_password(tmp_path: Path, users: UsersFile) -> None:
    first = create_first_admin(users, tmp_path)
    assert first is not None and first.name == "admin" and len(first.password) >= 20
    assert users.verify("admin", first.password).must_change
    password_file = tmp_path / PASSWORD_FILE
    assert password_file.read_text().strip() == first.password
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert first.password not in first.announcement() and str(password_file) in first.announcement()
    assert create_first_admin(users, tmp_path) is None  # never twice, never over a users file


def test_cli_users_add_list_passwd_remove(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GEADMIN_USERS_FILE", str(tmp_path / "u.toml"))
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert main(["users", "add", "alice", "--role", "operator", "--password-stdin"]) == 0
    assert main(["users", "list", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"name": "alice"' in out and '"role": "operator"' in out and "argon2" not in out
    monkeypatch.setattr("sys.stdin", io.StringIO("a brand new password\n"))
    assert main(["users", "passwd", "alice", "--password-stdin"]) == 0
    assert UsersFile(tmp_path / "u.toml").verify("alice", "a brand new password").name == "alice"
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    assert main(["users", "add", "bob", "--role", "viewer", "--password-stdin"]) == 2
    assert "at least 12 characters" in capsys.readouterr().err
    assert main(["users", "remove", "alice"]) == 0
    assert UsersFile(tmp_path / "u.toml").load() == {}
