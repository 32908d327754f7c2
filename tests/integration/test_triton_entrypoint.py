"""The triton images' entry point (deploy/triton-entrypoint.sh) never starts an open repository
API: run with the image's default arguments (no restricted-API flags) it refuses without a key,
and with TRITON_ADMIN_KEY it adds the flags every geadmin stack uses. The keyed case execs the
real tritonserver of the nvidia-pytriton wheel (the script's `exec tritonserver "$@"`, found on
PATH as in the image) and asks it over loopback."""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.processes import quick_stopping_triton
from tests.support.samples import copy_samples

pytestmark = pytest.mark.integration

ENTRYPOINT = Path(__file__).resolve().parents[2] / "deploy" / "triton-entrypoint.sh"
KEY = "entrypoint-test-key"


def status_of(url: str, key: str | None = None) -> int:
    request = urllib.request.Request(url, data=b"{}", method="POST",
                                     headers={"admin-key": key} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except urllib.error.URLError:  # not listening yet
        return 0


def test_without_restricted_flags_or_a_key_the_entrypoint_refuses_to_start(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin"}  # no tritonserver at all: the refusal comes first
    done = subprocess.run(["sh", str(ENTRYPOINT), f"--model-repository={tmp_path}"], env=env,
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 64, done.stderr
    assert "refusing to start Triton with its repository API open" in done.stderr
    assert "set TRITON_ADMIN_KEY" in done.stderr


def test_with_a_key_the_entrypoint_adds_the_restricted_flags_to_the_images_arguments(tmp_path: Path) -> None:
    server = quick_stopping_triton(copy_samples(tmp_path / "repo"), models=[])  # no key: no restricted flags
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "tritonserver").symlink_to(server.binary)
    env = server.environment()
    env.update(PATH=f"{on_path}:{env['PATH']}", TRITON_ADMIN_KEY=KEY)
    args = server.command()[1:]
    assert not any("restricted" in arg for arg in args)
    process = subprocess.Popen(["sh", str(ENTRYPOINT), *args], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        index = f"{server.http_url}/v2/repository/index"
        deadline = time.monotonic() + 60
        while status_of(index, KEY) != 200:
            assert process.poll() is None, "tritonserver exited"
            assert time.monotonic() < deadline, "tritonserver did not answer within 60 s"
            time.sleep(0.3)
        assert status_of(index) == 403  # the repository API needs the key
        assert status_of(index, "wrong") == 403
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        server.stop()  # no process of its own: cleans its shared memory and scratch directories
