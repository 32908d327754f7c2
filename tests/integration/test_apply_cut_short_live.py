"""`geadmin config apply` cut short while it runs, against a real tritonserver:

- Ctrl-C or SIGTERM while Triton loads the new config (a python model whose `initialize` says
  it began, then sleeps): the previous file is put back byte for byte and loaded again (Triton
  read the new one when its load began, and would serve it once that load ends), one line
  says so, the outcome is audited against its started row, and `geadmin status` is OK. A
  background job starts the CLI with SIGINT ignored: Ctrl-C (SIGINT) must work all the same.
- An apply killed after its write (GEADMIN_FAULT_POINT): `geadmin status` names the
  interrupted change with both ways out, and applying the same file again, as it says,
  finishes it (reloaded, checked, its started row closed): status OK, no rollback needed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.audit import facts
from geadmin.diagnose import interrupted
from geadmin.diagnose.interrupted import STARTED_ROW
from geadmin.repository import revisions
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support import repository
from tests.support.processes import TEST_EXIT_TIMEOUT_S, wait_for
from tests.support.samples import add_python_model, copy_samples

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODEL = "digits_classifier"
SLOW = "announced_slow_start"
OLD_DELAY, NEW_DELAY = 1000, 2500
# initialize writes the file its config's parameter `marker` names, then sleeps `init_s` seconds
ANNOUNCED_SLOW_INITIALIZE = (
    "import json\nparameters = json.loads(args['model_config']).get('parameters', {})\n"
    "marker = parameters.get('marker', {}).get('string_value', '')\n"
    "if marker:\n    Path(marker).write_text('loading')\n"
    "time.sleep(float(parameters.get('init_s', {}).get('string_value', '0')))")


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    root = tmp_path_factory.mktemp("cut_short_live")
    repo = copy_samples(root / "model_repository")
    add_python_model(repo, SLOW, ANNOUNCED_SLOW_INITIALIZE)
    server = TritonProcess(repo, models=[MODEL, SLOW], log_path=root / "tritonserver.log",
                           exit_timeout_s=TEST_EXIT_TIMEOUT_S)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def server(module_server: TritonProcess) -> Iterator[TritonProcess]:
    files = repository.snapshot(module_server.repository)
    yield module_server
    repository.put_back(module_server, files, loaded=[MODEL, SLOW])


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def cli(home: Path, *args: str, fault: str | None = None) -> subprocess.Popen[str]:
    """The CLI in a child process: a fresh geadmin start, like an operator's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEADMIN_")}
    env["GEADMIN_HOME"] = str(home)
    if fault:
        env["GEADMIN_FAULT_POINT"] = fault
    return subprocess.Popen([sys.executable, "-m", "geadmin.cli", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


def geadmin(home: Path, *args: str, fault: str | None = None) -> tuple[int, str, str]:
    child = cli(home, *args, fault=fault)
    out, err = child.communicate(timeout=180)
    return child.returncode, out, err


def where(server: TritonProcess) -> list[str]:
    return ["--url", server.http_url, "--repository", str(server.repository)]


def live_parameters(server: TritonProcess, model: str) -> dict[str, str]:
    with TritonClient(server.http_url) as client:
        return {k: v.string_value for k, v in client.model_config(model).parameters.items()}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_apply_interrupted_while_triton_loads_puts_the_previous_config_back_and_says_so(
    server: TritonProcess, home: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    path = server.repository / SLOW / "config.pbtxt"
    old = path.read_bytes()
    marker = tmp_path / "loading"
    new = old + (f'parameters [{{ key: "init_s" value: {{ string_value: "5" }} }}, '
                 f'{{ key: "marker" value: {{ string_value: "{marker}" }} }}]\n').encode()
    (tmp_path / "new.pbtxt").write_bytes(new)

    child = cli(home, "config", "apply", SLOW, str(tmp_path / "new.pbtxt"), *where(server))
    try:
        assert wait_for(marker.exists, 60), "Triton never began loading the new config"
        child.send_signal(signum)  # SIGINT although the child started with it ignored (a background job)
        out, err = child.communicate(timeout=180)
    finally:
        child.kill()
    assert child.returncode == 130, (out, err)
    first = next(line for line in err.splitlines() if not line.startswith("geadmin: note:"))
    assert first.startswith(f"geadmin: error: cut short by Ctrl-C or SIGTERM while Triton loaded the new "
                            f"config of {SLOW!r}: the previous config.pbtxt is restored, byte for byte, "
                            "and reloaded: it serves again"), err
    assert out == ""

    assert path.read_bytes() == old
    assert "marker" not in live_parameters(server, SLOW)  # the previous config serves, not the new one
    rolled_back, started = audit.query(model=SLOW)
    assert (started.result, rolled_back.result) == ("started", "rolled_back")
    assert facts(rolled_back.message)[STARTED_ROW] == str(started.id)
    assert rolled_back.message.startswith("cut short by Ctrl-C or SIGTERM")
    assert interrupted.unresolved(server.repository) == []
    code, out, err = geadmin(home, "status", *where(server))
    assert code == 0, out + err


@pytest.mark.parametrize(("step", "served_before"), [
    ("apply.written", OLD_DELAY),  # the new file is on disk, Triton was not asked
    ("apply.loaded", NEW_DELAY),  # Triton loaded it; the outcome row was never written
])
def test_applying_the_same_file_again_finishes_an_apply_that_was_cut_short(
    server: TritonProcess, home: Path, tmp_path: Path, step: str, served_before: int
) -> None:
    path = server.repository / MODEL / "config.pbtxt"
    old = path.read_bytes()
    new = old.replace(f"max_queue_delay_microseconds: {OLD_DELAY}".encode(),
                      f"max_queue_delay_microseconds: {NEW_DELAY}".encode())
    (tmp_path / "new.pbtxt").write_bytes(new)

    code, _, _ = geadmin(home, "config", "apply", MODEL, str(tmp_path / "new.pbtxt"), *where(server),
                         fault=step)
    assert code == -signal.SIGKILL
    with TritonClient(server.http_url) as client:
        assert client.model_config(MODEL).dynamic_batching.max_queue_delay_microseconds == served_before

    code, out, err = geadmin(home, "status", *where(server))
    assert code == 4, out + err  # DEGRADED: an interrupted change
    (flag,) = interrupted.unresolved(server.repository)
    again = f"geadmin config apply {MODEL} {path}"
    assert again in flag.reason() and flag.rollback_command in flag.reason()
    assert again in out + err

    code, out, err = geadmin(home, *again.split()[1:], *where(server))
    assert code == 0, out + err
    said = [line for line in out.splitlines() if not line.startswith(("---", "+++", "@@", " ", "-", "+"))]
    assert said[0].startswith(f"applied the new config of {MODEL!r}: Triton reloaded it"), out  # after diff
    assert "wrote before it was cut short: that change is now finished and closed" in out
    assert path.read_bytes() == new
    with TritonClient(server.http_url) as client:
        assert client.model_config(MODEL).dynamic_batching.max_queue_delay_microseconds == NEW_DELAY
    rows = audit.query(model=MODEL)
    assert [r.result for r in rows] == ["ok", "interrupted", "started"]
    assert facts(rows[0].message)[STARTED_ROW] == str(rows[2].id)
    assert rows[0].diff == rows[2].diff  # the change it finished: previous -> new
    assert revisions.revision_with_hash(server.repository, MODEL, revisions.sha256_of(new)) is not None
    assert interrupted.unresolved(server.repository) == []
    code, out, err = geadmin(home, "status", *where(server))
    assert code == 0, out + err

    code, out, err = geadmin(home, *again.split()[1:], *where(server))  # once closed, it is only unchanged
    assert code == 0 and "is unchanged: nothing to apply" in out, out + err
    assert len(audit.query(model=MODEL)) == 3
