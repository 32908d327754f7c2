"""The diagnostics bundle without a Triton: a client pointed at a port where nothing listens,
so every Triton call fails fast; the bundle is built anyway and says what it lacks."""

from __future__ import annotations

import errno
import json
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from geadmin import settings
from geadmin.cli.main import main
from geadmin.errors import RepositoryError
from geadmin.ops import bundle as bundle_module
from geadmin.ops.bundle import REDACTED, Bundle, build_bundle, write_bundle
from geadmin.stack.processes import free_port
from geadmin.triton.client import TritonClient

PREFIX = "geadmin-bundle/"
SECRET = "s3cret-key"
ALPHA_CONFIG = 'name: "alpha"\nbackend: "python"\nmax_batch_size: 8\n'
BETA_CONFIG = 'name: "beta"\nplatform: "ensemble"\n'
LINE = 20  # bytes per line of `numbered_log`


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for setting in settings.SETTINGS.values():
        monkeypatch.delenv(setting.env_name, raising=False)
    # never the user's workspace; outside tmp_path, whose listing the tests check (the verdict
    # reads the workspace's audit log)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture
def url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def client(url: str) -> Iterator[TritonClient]:
    with TritonClient(url, timeout_s=2.0) as triton:
        yield triton


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "model_repository"
    (repo / "alpha" / "1").mkdir(parents=True)
    (repo / "alpha" / "config.pbtxt").write_text(ALPHA_CONFIG)
    (repo / "beta").mkdir()
    (repo / "beta" / "config.pbtxt").write_text(BETA_CONFIG)
    (repo / "gamma").mkdir()  # no config.pbtxt
    (repo / "README.md").write_text("not a model\n")
    return repo


def numbered_log(path: Path, lines: int = 100) -> bytes:
    data = b"".join(f"I0101 line {n:04d} ...\n".encode() for n in range(lines))
    assert len(data) == lines * LINE
    path.write_bytes(data)
    return data


def archive_files(path: Path) -> dict[str, bytes]:
    """Archive member (without the top directory) -> contents; every member is a file."""
    files = {}
    with tarfile.open(path, "r:gz") as archive:
        for member in archive.getmembers():
            assert member.isfile(), member.name
            assert member.name.startswith(PREFIX), member.name
            extracted = archive.extractfile(member)
            assert extracted is not None
            files[member.name[len(PREFIX):]] = extracted.read()
    return files


def bundled(client: TritonClient, tmp_path: Path, **kwargs: object) -> dict[str, bytes]:
    out = write_bundle(build_bundle(client, **kwargs), tmp_path / "out" / "bundle.tar.gz")  # type: ignore[arg-type]
    return archive_files(out)


def manifest(files: dict[str, bytes]) -> dict[str, object]:
    data = json.loads(files["manifest.json"])
    assert isinstance(data, dict)
    return data


# -- Triton unreachable ----------------------------------------------------------------
def test_unreachable_triton_still_gives_a_bundle_that_says_what_is_missing(
    client: TritonClient, url: str, repository: Path, tmp_path: Path
) -> None:
    log = tmp_path / "tritonserver.log"
    numbered_log(log, 3)
    files = bundled(client, tmp_path, repository=repository, log_path=log)
    info = manifest(files)

    assert info["triton_url"] == url
    assert info["files"] == sorted(files)  # the manifest lists exactly what is inside
    missing = info["not_collected"]
    assert isinstance(missing, dict)
    assert set(missing) == {"server", "statistics", "normalized configs"}
    for section in ("server", "statistics", "normalized configs"):
        assert "unreachable" in missing[section], section
        assert url in missing[section], section
    assert not [name for name in files if name.startswith("server/")]
    # what the disk holds is there all the same
    assert {"host/platform.json", "host/npu-smi-info.txt", "geadmin/settings.json",
            "logs/tritonserver.log", "models/alpha/config.pbtxt", "models/beta/config.pbtxt"} <= set(files)
    platform_info = json.loads(files["host/platform.json"])
    assert set(platform_info) == {"system", "python", "machine"}


def test_configs_on_disk_are_included_as_written(
    client: TritonClient, repository: Path, tmp_path: Path
) -> None:
    files = bundled(client, tmp_path, repository=repository)
    models = sorted(name for name in files if name.startswith("models/"))
    assert models == ["models/alpha/config.pbtxt", "models/beta/config.pbtxt"]
    assert files["models/alpha/config.pbtxt"].decode() == ALPHA_CONFIG
    assert files["models/beta/config.pbtxt"].decode() == BETA_CONFIG
    assert "configs on disk" not in manifest(files)["not_collected"]  # type: ignore[operator]


def test_a_config_linked_out_of_its_model_directory_never_reaches_the_archive(
    client: TritonClient, repository: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "id_rsa"
    secret.write_text(f"PRIVATE KEY {SECRET}\n")  # what a repository writer must not fetch
    (repository / "gamma" / "config.pbtxt").symlink_to(secret)
    files = bundled(client, tmp_path, repository=repository)
    assert not any(SECRET.encode() in data for data in files.values())
    assert "models/gamma/config.pbtxt" not in files
    said = manifest(files)["not_collected"]["models/gamma/config.pbtxt"]  # type: ignore[index]
    assert f"links out of its model directory (to {secret})" in said
    assert files["models/alpha/config.pbtxt"].decode() == ALPHA_CONFIG  # the others as before


def test_an_unknown_or_missing_repository_is_reported(client: TritonClient, tmp_path: Path) -> None:
    missing = manifest(bundled(client, tmp_path))["not_collected"]
    assert isinstance(missing, dict)
    assert "--repository" in missing["configs on disk"]
    assert "--triton-log" in missing["log"]

    gone = tmp_path / "no-such-repository"
    missing = manifest(bundled(client, tmp_path, repository=gone))["not_collected"]
    assert isinstance(missing, dict)
    assert str(gone) in missing["configs on disk"]
    assert "not a directory" in missing["configs on disk"]


# -- the log ---------------------------------------------------------------------------
def test_the_whole_log_when_it_is_small(client: TritonClient, tmp_path: Path) -> None:
    log = tmp_path / "tritonserver.log"
    data = numbered_log(log, 10)
    assert bundled(client, tmp_path, log_path=log, log_bytes=10_000)["logs/tritonserver.log"] == data


@pytest.mark.parametrize("log_bytes", [10 * LINE, 10 * LINE + 7, 11 * LINE - 1])
def test_the_log_is_cut_to_its_last_log_bytes_at_a_line_start(
    client: TritonClient, tmp_path: Path, log_bytes: int
) -> None:
    log = tmp_path / "tritonserver.log"
    data = numbered_log(log, 100)
    tail = bundled(client, tmp_path, log_path=log, log_bytes=log_bytes)["logs/tritonserver.log"]
    assert len(tail) <= log_bytes
    assert tail == data[-10 * LINE:]  # the last 10 whole lines; a cut 11th is left out
    assert tail.startswith(b"I0101 line 0090")
    assert tail.endswith(b"I0101 line 0099 ...\n")


def test_a_log_of_one_huge_line_is_cut_to_exactly_log_bytes(client: TritonClient, tmp_path: Path) -> None:
    log = tmp_path / "tritonserver.log"
    log.write_bytes(b"x" * 5000 + b"END")
    tail = bundled(client, tmp_path, log_path=log, log_bytes=100)["logs/tritonserver.log"]
    assert tail == b"x" * 97 + b"END"


def test_log_bytes_zero_gives_an_empty_log(client: TritonClient, tmp_path: Path) -> None:
    log = tmp_path / "tritonserver.log"
    numbered_log(log, 10)
    assert bundled(client, tmp_path, log_path=log, log_bytes=0)["logs/tritonserver.log"] == b""


def test_an_unreadable_log_is_reported(client: TritonClient, tmp_path: Path) -> None:
    log = tmp_path / "no-such.log"
    files = bundled(client, tmp_path, log_path=log)
    assert "logs/tritonserver.log" not in files
    missing = manifest(files)["not_collected"]
    assert isinstance(missing, dict)
    assert str(log) in missing["log"]


# -- npu-smi ---------------------------------------------------------------------------
def test_npu_smi_not_installed(client: TritonClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundle_module.shutil, "which", lambda *args, **kwargs: None)
    text = bundled(client, tmp_path)["host/npu-smi-info.txt"].decode()
    assert "npu-smi is not installed" in text


def test_npu_smi_output_is_included(
    client: TritonClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "npu-smi"
    script.write_text('#!/bin/sh\necho "NPU 910B2 health OK (asked for: $1)"\necho "warn" >&2\nexit 3\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    text = bundled(client, tmp_path)["host/npu-smi-info.txt"].decode()
    assert "NPU 910B2 health OK (asked for: info)" in text
    assert "[stderr]\nwarn" in text
    assert "[exit code 3]" in text
    assert "not installed" not in text


# -- secrets ---------------------------------------------------------------------------
def test_the_admin_key_is_in_no_file_of_the_archive(
    url: str, repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEADMIN_ADMIN_KEY", SECRET)
    monkeypatch.setenv("GEADMIN_TRITON_URLS", f"a={url}?{SECRET}")  # a setting shown as is
    log = tmp_path / "tritonserver.log"
    log.write_text(f"I0101 started\nI0102 option admin-key={SECRET}\nI0103 {SECRET}{SECRET} again\n")
    (repository / "alpha" / "config.pbtxt").write_text(f'name: "alpha"\n# {SECRET}\n')
    stack_file = tmp_path / "stack.json"
    stack_file.write_text(json.dumps({"pid": 1, "admin_key": SECRET}))
    with TritonClient(url, admin_key="flag-k3y-longer", timeout_s=2.0) as client:
        files = bundled(client, tmp_path, repository=repository, log_path=log, stack_file=stack_file)

    assert {"logs/tritonserver.log", "geadmin/stack.json", "models/alpha/config.pbtxt"} <= set(files)
    for name, data in files.items():
        assert SECRET.encode() not in data, name
        assert b"flag-k3y-longer" not in data, name
    assert files["logs/tritonserver.log"].decode() == (
        f"I0101 started\nI0102 option admin-key={REDACTED}\nI0103 {REDACTED}{REDACTED} again\n")
    shown = json.loads(files["geadmin/settings.json"])
    assert shown["environment"]["GEADMIN_ADMIN_KEY"] == "set"
    assert shown["admin_key"] == "set"
    assert shown["environment"]["GEADMIN_TRITON_URLS"] == f"a={url}?{REDACTED}"
    assert shown["environment"]["GEADMIN_REPOSITORY"] is None


def test_every_key_geadmin_knows_is_redacted_not_only_the_servers(
    url: str, repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fleet's admin key and a servers file's per-server key were left in a collected log."""
    fleet_key, other_key = "fleet-k3y-for-every-replica", "server-b-k3y-from-the-file"
    monkeypatch.setenv("GEADMIN_FLEET_ADMIN_KEY", fleet_key)
    servers = tmp_path / "servers.toml"
    servers.write_text(f'[[server]]\nname = "b"\nurl = "http://10.0.0.9:8000"\nadmin_key = "{other_key}"\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers))
    log = tmp_path / "tritonserver.log"
    log.write_text(f"I0101 a proxy said: key {fleet_key} refused, and {other_key}\n")
    with TritonClient(url, timeout_s=2.0) as client:
        files = bundled(client, tmp_path, repository=repository, log_path=log)
    for name, data in files.items():
        assert fleet_key.encode() not in data and other_key.encode() not in data, name
    said = files["logs/tritonserver.log"].decode()
    assert said == f"I0101 a proxy said: key {REDACTED} refused, and {REDACTED}\n"


def test_settings_say_not_set_without_a_key(client: TritonClient, tmp_path: Path) -> None:
    shown = json.loads(bundled(client, tmp_path)["geadmin/settings.json"])
    assert shown["environment"]["GEADMIN_ADMIN_KEY"] == "not set"
    assert shown["admin_key"] == "not set"
    assert set(shown["environment"]) == {s.env_name for s in settings.SETTINGS.values()}


def test_a_secret_cut_by_the_log_window_is_not_left_half_visible(
    client: TritonClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEADMIN_ADMIN_KEY", SECRET)
    log = tmp_path / "tritonserver.log"
    log.write_bytes(f"I0101 key={SECRET} loaded\nI0102 ready\n".encode())
    window = len("cret-key loaded\nI0102 ready\n")  # starts inside the key
    tail = bundled(client, tmp_path, log_path=log, log_bytes=window)["logs/tritonserver.log"]
    assert tail == b"I0102 ready\n"


def test_secrets_are_redacted_in_their_json_escaped_form_too() -> None:
    quoted = 'k"e\\y'
    bundle = Bundle(secrets=(quoted, "abc", "abcdef"))
    bundle.add_json("x.json", {"quoted": f"<{quoted}>", "nested": "abcdef abc"})
    text = bundle.files["x.json"].decode()
    assert json.loads(text) == {"quoted": f"<{REDACTED}>", "nested": f"{REDACTED} {REDACTED}"}
    assert "def" not in text


def test_the_stack_file_is_included(client: TritonClient, tmp_path: Path) -> None:
    stack_file = tmp_path / "stack.json"
    stack_file.write_text('{"pid": 4242}\n')
    assert bundled(client, tmp_path, stack_file=stack_file)["geadmin/stack.json"] == b'{"pid": 4242}\n'
    assert "geadmin/stack.json" not in bundled(client, tmp_path, stack_file=tmp_path / "none.json")


# -- writing ---------------------------------------------------------------------------
def test_a_write_leaves_exactly_the_archive(client: TritonClient, tmp_path: Path) -> None:
    out = tmp_path / "new" / "dir" / "b.tar.gz"  # parents are created
    assert write_bundle(build_bundle(client), out) == out
    assert os.listdir(out.parent) == ["b.tar.gz"]
    assert "manifest.json" in archive_files(out)


def test_a_write_replaces_an_older_archive(client: TritonClient, tmp_path: Path) -> None:
    out = tmp_path / "b.tar.gz"
    out.write_bytes(b"old")
    write_bundle(build_bundle(client), out)
    assert os.listdir(tmp_path) == ["b.tar.gz"]
    assert "manifest.json" in archive_files(out)


def test_a_parent_that_cannot_be_created_is_a_clear_error(client: TritonClient, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    before = sorted(os.listdir(tmp_path))
    out = blocker / "sub" / "b.tar.gz"
    with pytest.raises(RepositoryError) as raised:
        write_bundle(build_bundle(client), out)
    message = str(raised.value)
    assert f"cannot write the bundle to {out}" in message
    assert f"{blocker} is not a directory" in message
    assert sorted(os.listdir(tmp_path)) == before
    assert blocker.read_text() == "x"


def test_a_directory_as_the_output_is_a_clear_error(client: TritonClient, tmp_path: Path) -> None:
    target = tmp_path / "adir"
    target.mkdir()
    with pytest.raises(RepositoryError, match="is a directory"):
        write_bundle(build_bundle(client), target)
    assert os.listdir(tmp_path) == ["adir"]
    assert os.listdir(target) == []


def test_a_failed_write_leaves_no_temp_file_and_the_old_archive(
    client: TritonClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "b.tar.gz"
    out.write_bytes(b"old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(bundle_module.os, "fsync", full)
    with pytest.raises(RepositoryError) as raised:
        write_bundle(build_bundle(client), out)
    assert str(raised.value) == f"cannot write the bundle to {out}: {os.strerror(errno.ENOSPC)}"
    assert os.listdir(tmp_path) == ["b.tar.gz"]
    assert out.read_bytes() == b"old"


# -- the command -----------------------------------------------------------------------
def test_the_command_writes_the_bundle_and_names_what_is_missing(
    url: str, repository: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "b.tar.gz"
    log = tmp_path / "tritonserver.log"
    data = numbered_log(log, 100)
    code = main(["bundle", "-o", str(out), "--url", url, "--repository", str(repository),
                 "--triton-log", str(log), "--log-mb", str(5 * LINE / (1 << 20)), "--timeout", "2"])
    assert code == 0
    files = archive_files(out)
    assert files["logs/tritonserver.log"] == data[-5 * LINE:]
    assert "models/alpha/config.pbtxt" in files
    printed = capsys.readouterr().out
    assert f"wrote {out} ({len(files)} files)" in printed
    assert "not collected: server: " in printed
    assert "unreachable" in printed


def test_the_command_json(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b.tar.gz"
    assert main(["bundle", "-o", str(out), "--url", url, "--json", "--timeout", "2"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["path"] == str(out)
    assert printed["files"] == sorted(archive_files(out))
    assert "unreachable" in printed["not_collected"]["server"]


def test_the_command_reports_an_unwritable_output(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(["bundle", "-o", str(blocker / "b.tar.gz"), "--url", url, "--timeout", "2"]) == 2
    assert f"{blocker} is not a directory" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["-1", "nan", "inf", "lots"])
def test_the_command_refuses_a_bad_log_size(
    bad: str, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["bundle", "-o", str(tmp_path / "b.tar.gz"), "--url", url, f"--log-mb={bad}"])
    assert raised.value.code == 2
    assert "--log-mb" in capsys.readouterr().err
    assert not (tmp_path / "b.tar.gz").exists()


def test_configs_past_the_bundles_bound_are_named_not_packed(
    client: TritonClient, repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import geadmin.ops.bundle as module

    sizes = {n: len((repository / n / "config.pbtxt").read_bytes()) for n in ("alpha", "beta")}
    monkeypatch.setattr(module, "MAX_CONFIGS_BYTES", sizes["alpha"])  # room for the first only
    files = bundled(client, tmp_path, repository=repository)
    assert "models/alpha/config.pbtxt" in files and "models/beta/config.pbtxt" not in files
    manifest = json.loads(files["manifest.json"])
    assert "the bundle's 0 MiB for configs" in json.dumps(manifest), manifest
