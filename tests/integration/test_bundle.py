"""`geadmin bundle` against a real tritonserver (read only: the session server's state is kept),
and against an address where nothing listens."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from geadmin import settings
from geadmin.cli.main import main
from geadmin.domain import ModelState
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.samples import SAMPLE_MODELS

PREFIX = "geadmin-bundle/"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for setting in settings.SETTINGS.values():
        monkeypatch.delenv(setting.env_name, raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))  # never the user's workspace


def archive_files(path: Path) -> dict[str, bytes]:
    files = {}
    with tarfile.open(path, "r:gz") as archive:
        for member in archive.getmembers():
            assert member.isfile() and member.name.startswith(PREFIX), member.name
            extracted = archive.extractfile(member)
            assert extracted is not None
            files[member.name[len(PREFIX):]] = extracted.read()
    return files


def as_json(files: dict[str, bytes], name: str) -> Any:
    assert name in files, f"{name} not in {sorted(files)}"
    return json.loads(files[name])


@pytest.fixture(scope="module")
def server_bundle(
    triton_server: TritonProcess, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, bytes], str]:
    """One bundle of the session server, and what the command printed."""
    out = tmp_path_factory.mktemp("bundle") / "b.tar.gz"
    with pytest.MonkeyPatch.context() as env:
        for setting in settings.SETTINGS.values():
            env.delenv(setting.env_name, raising=False)
        env.setenv("GEADMIN_HOME", str(out.parent / "home"))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(["bundle", "-o", str(out), "--url", triton_server.http_url,
                         "--triton-log", str(triton_server.log_path),
                         "--repository", str(triton_server.repository)])
    assert code == 0
    return archive_files(out), printed.getvalue()


def test_server_metadata_and_health(server_bundle: tuple[dict[str, bytes], str],
                                    triton_server: TritonProcess) -> None:
    files, _ = server_bundle
    with TritonClient(triton_server.http_url) as client:
        info = client.server_info()
    metadata = as_json(files, "server/metadata.json")
    assert metadata["name"] == "triton"
    assert metadata["version"] == info.version
    assert metadata["version"]  # e.g. "2.50.0"
    assert "model_repository" in metadata["extensions"]
    assert as_json(files, "server/health.json") == {"live": True, "ready": True}


def test_index_lists_the_sample_models(server_bundle: tuple[dict[str, bytes], str],
                                       triton_server: TritonProcess) -> None:
    files, _ = server_bundle
    index = as_json(files, "server/index.json")
    assert sorted({entry["name"] for entry in index}) == sorted(SAMPLE_MODELS)
    with TritonClient(triton_server.http_url) as client:
        live = {(e.name, e.version): e.state.value for e in client.repository_index()}
    assert {(e["name"], e["version"]): e["state"] for e in index} == live


def loaded_models(files: dict[str, bytes]) -> set[str]:
    return {e["name"] for e in as_json(files, "server/index.json") if e["state"] == ModelState.READY.value}


def test_configs_on_disk_and_normalized(server_bundle: tuple[dict[str, bytes], str],
                                        triton_server: TritonProcess) -> None:
    files, _ = server_bundle
    loaded = loaded_models(files)
    assert "digits_classifier" in loaded
    for name in SAMPLE_MODELS:
        on_disk = (triton_server.repository / name / "config.pbtxt").read_bytes()
        assert files[f"models/{name}/config.pbtxt"] == on_disk, name
        normalized = f"models/{name}/config.normalized.json"
        if name in loaded:
            assert as_json(files, normalized)["name"] == name
        else:
            assert normalized not in files
    classifier = as_json(files, "models/digits_classifier/config.normalized.json")
    assert classifier["max_batch_size"] == 32
    assert classifier["input"] and classifier["output"]


def test_statistics_cover_the_loaded_models(server_bundle: tuple[dict[str, bytes], str]) -> None:
    files, _ = server_bundle
    statistics = as_json(files, "server/statistics.json")
    assert isinstance(statistics, list)
    assert {entry["name"] for entry in statistics} >= loaded_models(files)
    assert all("inferenceStats" in entry for entry in statistics)


def test_the_log_and_a_complete_manifest(server_bundle: tuple[dict[str, bytes], str],
                                         triton_server: TritonProcess) -> None:
    files, printed = server_bundle
    log = files["logs/tritonserver.log"].decode()
    assert "Started HTTPService" in log
    assert triton_server.log_path.read_text(errors="replace").startswith(log[:200])  # small log: all of it
    manifest = as_json(files, "manifest.json")
    assert manifest["not_collected"] == {}
    assert manifest["triton_url"] == TritonClient(triton_server.http_url).url
    assert manifest["files"] == sorted(files)
    assert "not collected" not in printed
    assert f"({len(files)} files)" in printed


def test_nothing_listening_still_writes_a_bundle(
    tmp_path: Path, triton_server: TritonProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "down.tar.gz"
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["bundle", "-o", str(out), "--url", url, "--repository", str(triton_server.repository),
                 "--triton-log", str(triton_server.log_path), "--timeout", "2"]) == 0
    files = archive_files(out)
    missing = as_json(files, "manifest.json")["not_collected"]
    assert "unreachable" in missing["server"]
    assert url in missing["server"]
    assert "unreachable" in missing["statistics"]
    assert not [name for name in files if name.startswith("server/")]
    assert not [name for name in files if name.endswith("config.normalized.json")]
    assert {f"models/{name}/config.pbtxt" for name in SAMPLE_MODELS} <= set(files)  # from the disk
    assert "Started HTTPService" in files["logs/tritonserver.log"].decode()
    assert "not collected: server: " in capsys.readouterr().out
