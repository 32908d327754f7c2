"""The built wheel carries everything `geadmin up` needs: a fresh venv, `pip install` the
wheel, start the stack, and the dashboard answers and every sample model is READY."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

from geadmin.stack.processes import free_ports
from tests.support.processes import OutputCollector, descendants
from tests.support.samples import SAMPLE_MODELS

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                   check=True, timeout=300, capture_output=True)
    return next(out.glob("geadmin-*.whl"))


def test_the_wheel_holds_the_dashboard_and_the_samples(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "geadmin_dashboard/pages/app.py" in names and "geadmin_dashboard/pages/ui/context.py" in names
    assert {f"geadmin_dashboard/pages/{page.name}" for page in (ROOT / "pages").glob("*.py")} <= names
    assert "geadmin/samples/model_repository/digits_pipeline/1/.gitkeep" in names
    sources = {str(p.relative_to(ROOT)) for p in (ROOT / "geadmin").rglob("*.py") if "samples" not in p.parts}
    assert sources <= names, f"modules missing from the wheel: {sorted(sources - names)}"


def test_pip_install_of_the_wheel_in_a_fresh_venv_runs_the_stack(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # --no-compile: byte-compiling every dependency costs CPU time beside the other workers and
    # proves nothing about the wheel
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-compile", str(wheel)],
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    http, grpc, metrics, dashboard = free_ports(4)
    env = {key: value for key, value in os.environ.items() if not key.startswith("GEADMIN_")}
    env["GEADMIN_HOME"] = str(tmp_path / "home")
    process = subprocess.Popen(
        [str(venv / "bin" / "geadmin"), "up", "--http-port", str(http), "--grpc-port", str(grpc),
         "--metrics-port", str(metrics), "--dashboard-port", str(dashboard)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    try:
        output = OutputCollector(process).wait_for("models: ", timeout_s=180)
        with urllib.request.urlopen(f"http://127.0.0.1:{dashboard}/_stcore/health", timeout=5) as r:
            assert r.status == 200
        assert f"models: {len(SAMPLE_MODELS)} of {len(SAMPLE_MODELS)} READY" in output, output
        stack = json.loads((tmp_path / "home" / "stack.json").read_text())
        assert stack["triton"]["state"] == "running"
        # The dashboard runs the wheel's pages, not this checkout's.
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in descendants(process.pid)]
        expected = f"{venv}/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages/" \
            "geadmin_dashboard/pages/app.py"
        assert any(expected.encode() in command for command in commands), commands
    finally:
        process.terminate()
        process.wait(20)
