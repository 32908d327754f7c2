"""Sign-in that cannot be used against the site: capped lockouts, limits per user and per
client, a bounded failure table, a bound on concurrent argon2 checks; sessions with an
absolute lifetime whose role is read again at each click; OIDC logins with no role unless
mapped and idle/age limits that hold across tabs; no sign-in only for loopback requests."""

from __future__ import annotations

import contextlib
import re
import threading
from pathlib import Path

import pytest

from geadmin import settings
from geadmin.access.guard import for_identity
from geadmin.access.identity import (
    Identity,
    Mode,
    ModeDecision,
    client_address,
    oidc_identity,
    open_request_problem,
    parse_role_map,
    resolve_mode,
)
from geadmin.access.roles import GuardedAction, Role
from geadmin.access.sessions import OidcLogins, Session, local_session, refreshed
from geadmin.access.signin import MAX_LOCKOUT_S, FailedSignIns, VerifySlots, sign_in
from geadmin.access.users import User, UsersFile, still_allowed
from geadmin.errors import (
    ConfigError,
    SessionExpiredError,
    SignInBusyError,
    SignInError,
    SignInRateLimitedError,
    UserAccountError,
)
from tests.support.auth import admin_auth

PASSWORD = "correct horse battery"
ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def users(tmp_path: Path) -> UsersFile:
    file = UsersFile(tmp_path / "users.toml")
    file.add("alice", Role.OPERATOR, PASSWORD, auth=admin_auth())
    return file


# -- lockouts -------------------------------------------------------------------------------
def test_sixty_wrong_guesses_lock_a_user_out_for_fifteen_minutes_at_most() -> None:
    clock = Clock()
    attempts = FailedSignIns(limit=5, window_s=300, lockout_s=30, clock=clock)
    longest_s = 0.0
    for _ in range(60):
        attempts.failed("admin")
        try:
            attempts.check("admin")
        except SignInRateLimitedError as exc:
            longest_s = max(longest_s, exc.retry_after_s)
            clock.now += exc.retry_after_s + 0.1  # the attacker waits out each lockout and goes on
    assert MAX_LOCKOUT_S == 15 * 60
    assert longest_s == pytest.approx(MAX_LOCKOUT_S)  # doubled up to the cap, never beyond (was 17 h)
    attempts.check("admin")  # after the last lockout ran out: free again


def test_one_client_guessing_many_names_is_locked_out_but_others_are_not(users: UsersFile) -> None:
    clock = Clock()
    attempts = FailedSignIns(limit=5, client_limit=4, window_s=300, lockout_s=30, clock=clock)
    for name in ("root", "admin", "bob", "carol"):  # one guess per name: no user reaches its limit
        with pytest.raises(SignInError):
            sign_in(users, attempts, name, "wrong password!!", client="203.0.113.9")
    with pytest.raises(SignInRateLimitedError, match=r"from your address \(203\.0\.113\.9\).*30 s"):
        sign_in(users, attempts, "alice", PASSWORD, client="203.0.113.9")  # even the right password
    assert sign_in(users, attempts, "alice", PASSWORD, client="198.51.100.7").name == "alice"
    with pytest.raises(SignInRateLimitedError):  # a success elsewhere does not free that client
        attempts.check("dave", "203.0.113.9")
    clock.now += 31
    assert sign_in(users, attempts, "alice", PASSWORD, client="203.0.113.9").name == "alice"


def test_the_failure_table_is_bounded_and_drops_the_oldest_unlocked_first() -> None:
    clock = Clock()
    attempts = FailedSignIns(limit=2, window_s=300, lockout_s=30, max_entries=100, clock=clock)
    attempts.failed("first")
    attempts.failed("first")  # locked out
    attempts.failed("second")  # one failure: nothing to keep
    for number in range(5000):  # a flood of made-up names
        attempts.failed(f"made-up-{number}", client=f"10.0.{number // 250}.{number % 250}")
    assert len(attempts) == 100
    with pytest.raises(SignInRateLimitedError):
        attempts.check("first")  # the oldest record, but a lock is never forgotten
    assert ("user", "second") not in attempts._table


def test_a_flood_of_over_long_passwords_never_evicts_a_lockout(users: UsersFile) -> None:
    attempts = FailedSignIns(limit=2)
    for _ in range(2):
        with pytest.raises(SignInError):
            sign_in(users, attempts, "alice", "wrong password!!")
    for number in range(10_000):  # free attempts (never hashed), forged client addresses
        with pytest.raises(SignInError):
            sign_in(users, attempts, f"made-up-{number}", "x" * 1025, client=f"10.{number // 250}.0.{number}")
    assert len(attempts) <= 10_000
    with pytest.raises(SignInRateLimitedError):
        attempts.check("alice")


def test_a_table_full_of_lockouts_refuses_new_names_instead_of_forgetting_one() -> None:
    attempts = FailedSignIns(limit=1, max_entries=3, clock=Clock())
    for name in ("a", "b", "c"):
        attempts.failed(name)  # each locked out
    with pytest.raises(SignInRateLimitedError, match="too many sign-in attempts on this dashboard"):
        attempts.check("alice")
    for name in ("a", "b", "c"):
        with pytest.raises(SignInRateLimitedError, match="failed sign-ins for"):
            attempts.check(name)


def test_parallel_wrong_passwords_run_no_more_checks_than_the_limit(users: UsersFile,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    attempts, verified, lock = FailedSignIns(limit=5, client_limit=1000), [], threading.Lock()
    real_verify = UsersFile.verify

    def counting_verify(self: UsersFile, name: str, password: str) -> User:
        with lock:
            verified.append(name)
        return real_verify(self, name, password)

    monkeypatch.setattr(UsersFile, "verify", counting_verify)
    barrier = threading.Barrier(30)

    def guess() -> None:
        barrier.wait()
        with contextlib.suppress(SignInError):
            sign_in(users, attempts, "alice", "wrong password!!", client="203.0.113.9")

    threads = [threading.Thread(target=guess) for _ in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 1 <= len(verified) <= 5
    with pytest.raises(SignInRateLimitedError):
        attempts.check("alice")


def test_an_attempt_that_is_neither_right_nor_wrong_gives_its_reservation_back() -> None:
    attempts = FailedSignIns(limit=1)
    for _ in range(3):
        attempts.check("alice", "203.0.113.9")
        attempts.released("alice", "203.0.113.9")
    attempts.check("alice", "203.0.113.9")
    with pytest.raises(SignInRateLimitedError, match="under way"):
        attempts.check("alice", "198.51.100.7")  # one attempt under way already: the limit's worth


def test_password_checks_beyond_the_bound_are_refused_not_queued(users: UsersFile) -> None:
    slots = VerifySlots(2, wait_s=0.2)
    attempts = FailedSignIns()
    holding, release = threading.Barrier(3), threading.Event()

    def hold() -> None:
        with slots.slot():
            holding.wait()
            release.wait(10)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for thread in holders:
        thread.start()
    holding.wait()
    try:
        with pytest.raises(SignInBusyError, match="checking 2 other sign-ins right now: try again"):
            sign_in(users, attempts, "alice", PASSWORD, slots=slots)
        attempts.check("alice")  # a busy refusal is not a failed guess
    finally:
        release.set()
        for thread in holders:
            thread.join()
    assert sign_in(users, attempts, "alice", PASSWORD, slots=slots).name == "alice"


class CountingUsers(UsersFile):
    """The real users file and argon2 check, counting how many checks overlap."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.running = self.most = 0
        self.lock = threading.Lock()

    def verify(self, name: str, password: str) -> User:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            return super().verify(name, password)
        finally:
            with self.lock:
                self.running -= 1


def test_a_burst_of_sign_ins_never_runs_more_argon2_checks_than_the_slots(users: UsersFile) -> None:
    counting = CountingUsers(users.path)
    slots, attempts = VerifySlots(2, wait_s=60), FailedSignIns(limit=1000, client_limit=1000)
    threads = [threading.Thread(target=sign_in, args=(counting, attempts, "alice", PASSWORD),
                                kwargs={"slots": slots}) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert counting.most == 2


# -- sessions -------------------------------------------------------------------------------
def test_a_busy_session_still_ends_at_its_absolute_lifetime() -> None:
    session = Session(Identity("alice", Role.OPERATOR, Mode.LOCAL), last_seen_s=0.0, started_s=0.0)
    for now_s in range(60, 3600, 60):  # active every minute
        session = session.touched(float(now_s), idle_s=300.0, max_s=3600.0)
    with pytest.raises(SessionExpiredError, match="at most 1 hours"):
        session.touched(3601.0, idle_s=300.0, max_s=3600.0)


def test_a_check_without_activity_does_not_keep_a_session_alive() -> None:
    session = Session(Identity("alice", Role.OPERATOR, Mode.LOCAL), last_seen_s=0.0, started_s=0.0)
    assert session.touched(200.0, idle_s=300.0, touch=False).last_seen_s == 0.0  # a fragment's timer
    with pytest.raises(SessionExpiredError, match="without activity"):
        session.touched(301.0, idle_s=300.0, touch=False)


def test_roles_are_read_again_and_a_removed_or_re_keyed_user_is_signed_out(users: UsersFile) -> None:
    session = local_session(users.load()["alice"], now_s=0.0)
    assert refreshed(session, users.load()) is session
    users.set_role("alice", Role.VIEWER, auth=admin_auth())
    demoted = refreshed(session, users.load_cached())
    assert demoted.identity.role is Role.VIEWER and demoted.started_s == 0.0
    users.set_password("alice", "a password set by an admin", auth=admin_auth())
    with pytest.raises(SessionExpiredError, match="password of 'alice' was changed"):
        refreshed(demoted, users.load_cached())
    users.remove("alice", auth=admin_auth())
    with pytest.raises(SessionExpiredError, match="'alice' no longer exists"):
        refreshed(demoted, users.load_cached())


def test_the_cached_users_file_sees_every_change(users: UsersFile) -> None:
    assert users.load_cached()["alice"].role is Role.OPERATOR
    users.set_role("alice", Role.ADMIN, auth=admin_auth())
    assert users.load_cached()["alice"].role is Role.ADMIN
    users.path.write_text("[users\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        users.load_cached()


# -- OIDC -----------------------------------------------------------------------------------
def test_an_oidc_account_in_no_mapped_group_gets_no_role_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEADMIN_OIDC_DEFAULT_ROLE", raising=False)
    assert settings.OIDC_DEFAULT_ROLE.get() == "none"  # was "viewer": any account at the provider
    mapping = parse_role_map("ml-oncall=operator")
    with pytest.raises(SignInError, match="no group that GEADMIN_OIDC_ROLE_MAP maps to a role"):
        oidc_identity({"sub": "eve", "groups": ["contractors"]}, "groups", mapping, None)
    with pytest.raises(SignInError):  # no groups claim at all
        oidc_identity({"sub": "eve"}, "groups", mapping, None)
    ann = oidc_identity({"sub": "ann", "groups": ["ml-oncall"]}, "groups", mapping, None)
    assert ann.role is Role.OPERATOR


def test_an_idle_oidc_login_stays_signed_out_in_every_tab() -> None:
    logins = OidcLogins()
    claims = {"sub": "ann", "iat": 1000, "nonce": "n1"}
    logins.touch(claims, 1000.0, idle_s=300, max_s=3600)
    logins.touch(claims, 1200.0, idle_s=300, max_s=3600)
    with pytest.raises(SessionExpiredError, match="without activity"):
        logins.touch(claims, 1501.0, idle_s=300, max_s=3600)
    with pytest.raises(SessionExpiredError, match="without activity"):  # a new tab, same cookie
        logins.touch(claims, 1502.0, idle_s=300, max_s=3600)
    logins.touch({"sub": "ann", "iat": 1600, "nonce": "n2"}, 1600.0, idle_s=300, max_s=3600)  # signed in anew


def test_an_oidc_login_ends_at_its_age_from_the_token_even_if_first_seen_late() -> None:
    logins = OidcLogins()
    claims = {"sub": "ann", "iat": 0}
    with pytest.raises(SessionExpiredError, match="at most 1 hours"):  # a cookie from yesterday
        logins.touch(claims, 3601.0, idle_s=300, max_s=3600)


def test_a_fragment_timer_does_not_keep_an_oidc_login_alive_and_signing_out_ends_it() -> None:
    logins = OidcLogins(max_entries=10)
    claims = {"sub": "ann", "iat": 0}
    logins.touch(claims, 0.0, idle_s=300, max_s=3600)
    logins.touch(claims, 200.0, idle_s=300, max_s=3600, touch=False)
    with pytest.raises(SessionExpiredError):
        logins.touch(claims, 301.0, idle_s=300, max_s=3600, touch=False)
    other = {"sub": "bob", "iat": 0}
    logins.touch(other, 0.0, idle_s=300, max_s=3600)
    logins.end(other, "signed out")
    with pytest.raises(SessionExpiredError, match="signed out"):
        logins.touch(other, 1.0, idle_s=300, max_s=3600)
    for number in range(50):
        logins.touch({"sub": f"u{number}", "iat": 0}, 2.0, idle_s=300, max_s=3600)
    assert len(logins._seen) <= 10 and len(logins._ended) <= 10


# -- no sign-in only on loopback ------------------------------------------------------------
@pytest.mark.parametrize(("headers", "problem"), [
    ({"Host": "127.0.0.1:8501"}, ""),
    ({"Host": "localhost:8501"}, ""),
    ({"Host": "[::1]:8501"}, ""),
    ({}, ""),
    ({"Host": "127.0.0.1:8501", "X-Forwarded-For": "203.0.113.9"}, "reverse proxy.*X-Forwarded-For"),
    ({"host": "localhost", "forwarded": "for=203.0.113.9"}, "reverse proxy.*Forwarded"),
    ({"Host": "localhost", "X-Real-IP": "203.0.113.9"}, "reverse proxy.*X-Real-IP"),
    ({"Host": "geadmin.example.org"}, "names the host 'geadmin.example.org'"),  # a proxy passing Host
    ({"Host": "rebound.attacker.example:8501"}, "answers only to localhost"),  # DNS rebinding
    ({"Host": "10.1.2.3:8501"}, "names the host"),
    ({"Host": "[::1"}, "names the host"),
])
def test_a_dashboard_without_sign_in_serves_loopback_requests_only(headers: dict[str, str],
                                                                   problem: str) -> None:
    found = open_request_problem(headers)
    assert (found == "") if not problem else re.search(problem, found), found


def test_the_client_address_comes_from_forwarded_for_only_with_configured_proxies() -> None:
    headers = {"X-Forwarded-For": "198.51.100.1, 203.0.113.9"}  # the first part is the client's claim
    assert client_address("10.0.0.2", headers, 0) == "10.0.0.2"  # no proxy: a header is not trusted
    assert client_address("10.0.0.2", headers, 1) == "203.0.113.9"
    assert client_address("10.0.0.2", headers, 2) == "198.51.100.1"
    assert client_address("10.0.0.2", headers, 3) == "10.0.0.2"  # fewer hops than configured
    assert client_address(None, {}, 0) == "loopback"


@pytest.mark.parametrize("setting", ["auto", "open"])
def test_sign_in_is_required_where_the_dashboard_image_says_so(setting: str) -> None:
    with pytest.raises(ConfigError, match=r"GEADMIN_REQUIRE_SIGN_IN is set.*geadmin users add"):
        resolve_mode(setting, address="127.0.0.1", users_file_exists=False, oidc_configured=False,
                     sign_in_required=True)
    assert resolve_mode("local", address="127.0.0.1", users_file_exists=False, oidc_configured=False,
                        sign_in_required=True) == ModeDecision(Mode.LOCAL, bootstrap=True)


def test_the_dashboard_image_sets_require_sign_in() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    stage = re.search(r"^FROM \S+ AS dashboard\n(.*?)(?=^FROM )", dockerfile, re.S | re.M)
    assert stage, "no dashboard stage in the Dockerfile"
    env = " ".join(re.findall(r"^ENV (.*?)(?<!\\)\n", stage.group(1).replace("\\\n", " "), re.M))
    assert "GEADMIN_REQUIRE_SIGN_IN=1" in env.split()


def test_a_huge_name_or_password_is_refused_unhashed_and_counted_small(users: UsersFile) -> None:
    attempts = FailedSignIns(limit=2)
    slots = VerifySlots(1, wait_s=0.1)
    with slots.slot():  # every slot taken: a password that reached argon2 would be told "busy"
        for _ in range(2):
            with pytest.raises(SignInError, match="unknown user or wrong password") as refused:
                sign_in(users, attempts, "alice", "x" * 10_000_000, slots=slots)
            assert not isinstance(refused.value, SignInBusyError)
    with pytest.raises(SignInRateLimitedError):
        attempts.check("alice")
    with pytest.raises(SignInError):
        sign_in(users, attempts, "m" * 1_000_000, PASSWORD)
    assert all(len(key) <= 65 for _, key in attempts._table)
    with pytest.raises(UserAccountError, match="at most 1024 characters"):
        users.set_password("alice", "y" * 1025, auth=admin_auth())


def test_a_background_run_asks_again_whether_its_starter_may_still_act(tmp_path: Path) -> None:
    users = UsersFile(tmp_path / "users.toml")
    users.add("olga", Role.OPERATOR, "a long enough password", auth=admin_auth())
    auth = for_identity(Identity("olga", Role.OPERATOR, Mode.LOCAL))
    assert still_allowed(auth, GuardedAction.RELOAD, users) == ""
    users.set_role("olga", Role.VIEWER, auth=admin_auth())
    assert still_allowed(auth, GuardedAction.RELOAD, users) == (
        "olga is viewer now, and reload needs operator: demoted since this started")
    users.remove("olga", auth=admin_auth())
    assert still_allowed(auth, GuardedAction.RELOAD, users) == (
        "olga was removed from the users file since this started")
    users.path.chmod(0o666)  # a users file others may write is refused: who may act cannot be told
    assert still_allowed(auth, GuardedAction.RELOAD, users).startswith("who may reload cannot be read now: ")
    # OIDC roles come with the login; the token holder and the OS user own the workspace
    for mode in (Mode.OIDC, Mode.TOKEN, Mode.OPEN):
        held = for_identity(Identity("olga", Role.OPERATOR, mode))
        assert still_allowed(held, GuardedAction.RELOAD, users) == ""
