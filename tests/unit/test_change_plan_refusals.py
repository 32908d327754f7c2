"""A change refused while it is planned (geadmin.ops.models.change_plan.plan_change: no such
revision, a config.pbtxt that is a symbolic link, a file over the size limit) is audited as the
apply's own refusals are: one `refused` row with the cause, by whoever asked for it — through
`geadmin config apply|rollback` and through any face that plans with an authorization. Planning
without one (the Config editor drawing the plan as the operator types) writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.errors import NotAuthorizedError, RepositoryError
from geadmin.ops.models.change_plan import plan_change
from geadmin.repository.modelconfig import MAX_CONFIG_BYTES
from geadmin.stack.processes import free_port
from geadmin.triton.client import TritonClient
from tests.support.auth import auth_as, viewer_auth

MODEL = "digits_classifier"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TRITON_URL", "ADMIN_KEY", "TRITON_LOG", "REPOSITORY", "SERVERS_FILE", "TRITON_URLS"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def nowhere() -> Iterator[TritonClient]:
    with TritonClient(f"http://127.0.0.1:{free_port()}", timeout_s=1.0) as client:
        yield client


def cli(capsys: pytest.CaptureFixture[str], url: str, repository: Path, *args: str) -> tuple[int, str]:
    code = main(["config", *args, "--url", url, "--repository", str(repository)])
    return code, capsys.readouterr().err


def test_a_rollback_to_a_revision_that_does_not_exist_is_refused_and_audited(
    sample_repository: Path, home: Path, nowhere: TritonClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = cli(capsys, nowhere.url, sample_repository, "rollback", MODEL, "999")
    assert code == ExitCode.FAILED
    (said,) = [line for line in err.splitlines() if line.startswith("geadmin: error:")]
    (row,) = audit.query(home=home)
    assert (row.action, row.model, row.result, row.server) == ("rollback", MODEL, "refused", nowhere.url)
    assert said == f"geadmin: error: {row.message}" and "999" in row.message


def test_an_apply_to_a_config_that_is_a_symbolic_link_is_refused_and_audited(
    sample_repository: Path, home: Path, nowhere: TritonClient, capsys: pytest.CaptureFixture[str],
    tmp_path: Path
) -> None:
    config = sample_repository / MODEL / "config.pbtxt"
    elsewhere = tmp_path / "elsewhere.pbtxt"
    elsewhere.write_bytes(config.read_bytes())
    config.unlink()
    config.symlink_to(elsewhere)
    new = tmp_path / "new.pbtxt"
    new.write_bytes(elsewhere.read_bytes().replace(b"max_batch_size: 32", b"max_batch_size: 16"))

    code, err = cli(capsys, nowhere.url, sample_repository, "apply", MODEL, str(new))
    assert code == ExitCode.FAILED
    (row,) = audit.query(home=home)
    assert (row.action, row.model, row.result) == ("apply", MODEL, "refused")
    assert f"geadmin: error: {row.message}" in err.splitlines()
    assert config.is_symlink() and config.read_bytes() == elsewhere.read_bytes()  # nothing written


def test_a_planning_refusal_is_audited_as_who_asked_and_planning_without_asking_writes_nothing(
    sample_repository: Path, home: Path, nowhere: TritonClient
) -> None:
    with pytest.raises(RepositoryError):
        plan_change(nowhere, sample_repository, MODEL, revision=999, home=home)  # the editor, drawing
    assert audit.query(home=home) == []

    with pytest.raises(RepositoryError) as refused:
        plan_change(nowhere, sample_repository, MODEL, revision=999, home=home, auth=auth_as("ann"))
    too_big = b"#" * (MAX_CONFIG_BYTES + 1)
    with pytest.raises(RepositoryError):
        plan_change(nowhere, sample_repository, MODEL, new=too_big, home=home, auth=auth_as("bob"))
    big, back = audit.query(home=home)
    assert (back.action, back.result, back.who, back.message) == ("rollback", "refused", "ann",
                                                                  str(refused.value))
    assert (big.action, big.result, big.who) == ("apply", "refused", "bob")


def test_planning_with_an_authorization_that_lacks_the_change_is_refused_before_reading(
    sample_repository: Path, home: Path, nowhere: TritonClient
) -> None:
    with pytest.raises(NotAuthorizedError):
        plan_change(nowhere, sample_repository, MODEL, revision=999, home=home, auth=viewer_auth())
    assert audit.query(home=home) == []
