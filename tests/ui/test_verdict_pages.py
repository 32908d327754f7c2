"""The verdict, drift and the server's history on the Overview, the Models page and the
sidebar, through Streamlit's AppTest against real tritonservers."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.domain import Ports
from geadmin.stack.drivers import ExitRecord
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import StackInfo, Workspace
from tests.support.apptest import APP, isolate, point_at, run
from tests.support.markdown_render import render
from tests.support.samples import add_python_model
from tests.support.stack import geadmin

CLASSIFIER = "digits_classifier"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path / "home")


def page(name: str) -> AppTest:
    """`name`.py of pages/; AppTest reruns the page it is told ("/" only switches to Overview)."""
    return AppTest.from_file(APP, default_timeout=30).switch_page(f"{name}.py")


def texts(at: AppTest) -> list[str]:
    return [e.value for e in (*at.error, *at.warning, *at.success, *at.info)]


def sidebar(at: AppTest) -> str:
    return "\n".join(m.value for m in at.sidebar.markdown) + "\n".join(c.value for c in at.sidebar.caption)


def test_a_failed_model_turns_the_banner_and_the_sidebar_degraded(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_python_model(sample_repository, "broken_init", "raise RuntimeError('weights.bin is missing')")
    point_at(monkeypatch, triton_factory(repository=sample_repository))
    at = run(page("overview"))
    (banner,) = [w.value for w in at.warning if w.value.startswith("**DEGRADED")]
    assert "model 'broken_init' failed" in banner and "weights.bin is missing" in banner
    assert "fix the cause, then load it again" in banner
    assert not [s.value for s in at.success if s.value.startswith("**OK")]
    assert "DEGRADED" in sidebar(at) and "broken_init" in sidebar(at)


def test_a_models_own_words_in_the_verdict_never_render_as_a_link_an_image_or_a_fake_badge(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed model's reason is the model's exception text: anyone who ships a model writes
    it. On the banner and the sidebar it stays text, shown as written."""
    planted = "[Fixed, click](https://evil.example) ![x](https://evil.example/p.png) <b>x</b> :green[OK]"
    add_python_model(sample_repository, "loud", f"raise RuntimeError({planted!r})")
    point_at(monkeypatch, triton_factory(repository=sample_repository))
    at = run(page("overview"))
    (banner,) = [w.value for w in at.warning if w.value.startswith("**DEGRADED")]
    failed = [e.value for e in at.error if "loud" in e.value]  # the Failed list names it with its reason
    assert failed
    for shown in (render(banner), render(sidebar(at)), *map(render, failed)):
        assert shown.links == [] and not {"image", "html_inline", "link_open"} & set(shown.constructs)
        assert "[Fixed, click](https://evil.example)" in shown.text  # as written
    assert ":green\\[OK\\]" in sidebar(at)  # no colour directive: the badge's own OK is the only one


def test_the_sidebar_turns_down_with_the_overview_when_triton_dies(
    triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sidebar draws before the page, from the verdict the page computed last; when the
    page then finds Triton gone, the whole app is drawn again: never OK beside a DOWN."""
    from pages.ui import verdict_view

    monkeypatch.setattr(verdict_view, "REUSE_S", 3600.0)  # the sidebar always reuses the page's last verdict
    server = point_at(monkeypatch, triton_factory())
    at = run(page("overview"))
    assert [s.value for s in at.success if s.value.startswith("**OK")] and "OK" in sidebar(at)

    server.stop()
    run(at)
    assert [e.value for e in at.error if e.value.startswith("**DOWN")]
    assert "DOWN" in sidebar(at) and "OK" not in sidebar(at)


def test_the_sidebar_on_another_page_reads_the_verdict_afresh(
    triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cache older than the page: the Models page says Triton is gone, so does the sidebar."""
    from pages.ui import verdict_view

    monkeypatch.setattr(verdict_view, "REUSE_S", 0.0)
    server = point_at(monkeypatch, triton_factory())
    at = run(page("models"))
    assert "OK" in sidebar(at)

    server.stop()
    run(at)
    assert at.error, "the Models page did not say Triton is gone"
    assert "DOWN" in sidebar(at) and "OK" not in sidebar(at)


def test_a_down_verdict_serves_the_sidebar_for_a_refresh_an_ok_one_for_a_second(
    triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While Triton hangs each verdict costs a timeout: a page that does not need Triton must
    not wait for one on every click, so a DOWN is reused for the badge's refresh period; an
    OK never for longer than REUSE_S (never green after Triton went away)."""
    from pages.ui import keys, verdict_view

    monkeypatch.setattr(verdict_view, "REUSE_S", 0.0)
    monkeypatch.setattr(verdict_view, "SIDEBAR_REFRESH_S", 3600.0)
    server = point_at(monkeypatch, triton_factory())
    at = run(page("audit"))
    (ok_at, _), = at.session_state[keys.VERDICT_PUBLISHED].values()
    run(at)
    (again_at, _), = at.session_state[keys.VERDICT_PUBLISHED].values()
    assert again_at > ok_at, "an OK verdict was reused past REUSE_S"
    server.stop()
    run(at)
    (down_at, found), = at.session_state[keys.VERDICT_PUBLISHED].values()
    assert found.verdict.level.value == "DOWN" and "DOWN" in sidebar(at)
    run(at)
    (reused_at, _), = at.session_state[keys.VERDICT_PUBLISHED].values()
    assert reused_at == down_at, "a DOWN verdict was computed again within the refresh period"


def test_a_hand_edited_config_is_flagged_on_overview_and_models_and_put_back(
    triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = point_at(monkeypatch, triton_factory())
    path = server.repository / CLASSIFIER / "config.pbtxt"
    at = run(page("overview"))
    ok = "**OK: Triton serves; 5 model(s) READY, none failed, none drifted"
    assert any(s.startswith(ok) for s in texts(at))

    path.write_text(path.read_text().replace("data_type: TYPE_FP32", "data_type: TYPE_FOO", 1))
    at = run(page("overview"))
    (flag,) = [w.value for w in at.warning if w.value.startswith(f"**{CLASSIFIER}** — on disk:")]
    assert "on disk: does not parse, line 6: " in flag and "serving the previous config since" in flag
    assert "open it in the Config editor and fix it" in flag
    assert any(w.value.startswith("**DEGRADED: model 'digits_classifier' serves a config that differs")
               for w in at.warning)
    table = at.dataframe[-1].value.set_index("model")
    assert table.loc[CLASSIFIER, "on disk"].startswith("drifted: does not parse, line 6")

    models = run(page("models"))
    flagged = f"**{CLASSIFIER}** — on disk: does not parse, line 6"
    assert any(w.value.startswith(flagged) for w in models.warning)

    editing = run(page("overview"))
    editing.button(key=f"overview.drift_edit.{CLASSIFIER}").click()
    editing = run(editing)  # the Config editor, opened on the drifted model
    assert editing.session_state["editor.model"] == CLASSIFIER
    assert any(h.value == "Config editor" for h in editing.title), [h.value for h in editing.title]

    at.button(key=f"overview.drift_put_back.{CLASSIFIER}").click()
    at = run(at)
    assert any("disk and Triton agree again" in s.value for s in at.success), texts(at)
    assert "TYPE_FOO" not in path.read_text()
    assert not [w.value for w in at.warning if "on disk:" in w.value]
    (row,) = audit.query(action="put-back-served")
    assert row.model == CLASSIFIER and row.origin == "dashboard"


def stack_info(home: Path, http_url: str, state: str, exits: tuple[ExitRecord, ...],
               triton_pid: int | None) -> StackInfo:
    port = int(http_url.rsplit(":", 1)[1])
    return StackInfo(os.getpid(), http_url, f"grpc://127.0.0.1:{free_port()}",
                     f"http://127.0.0.1:{free_port()}/metrics", Ports(port, free_port(), free_port()),
                     f"http://127.0.0.1:{free_port()}", home / "logs" / "tritonserver.log", home / "repo",
                     home,
                     triton_pid=triton_pid, triton_state=state, triton_started_at=time.time() - 600,
                     exits=exits)


def test_the_overview_shows_the_crash_the_supervisor_recorded(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path
) -> None:
    server = triton_factory()
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    crash = ExitRecord(time.time() - 100, None, "SIGKILL", 2154.0, True)
    Workspace(home).write_stack(stack_info(home, server.http_url, "running", (crash,), server.pid))
    at = run(page("overview"))
    (shown,) = [w.value for w in at.warning if w.value.startswith("Triton crashed and was restarted")]
    assert "killed by SIGKILL after 35 min — restarted" in shown
    assert "restarts since `geadmin up`: 1" in shown and "Up again for 10 min;" in shown
    assert any(e.label == "Server history" for e in at.expander)


def test_a_stopped_stack_triton_says_who_stopped_it_instead_of_is_the_url_right(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: it was stopped
    stopped = ExitRecord(time.time(), 1, None, 600.0, False, "stopped from the Stack page", requested=True)
    Workspace(home).write_stack(stack_info(home, url, "stopped", (stopped,), None))
    audit.record("stop", "triton", audit.Result.OK, actor=audit.Actor("alice", audit.Origin.DASHBOARD),
                 server="stack:local", message="asked the local stack to stop triton", home=home)
    at = run(page("overview"))
    (banner,) = [e.value for e in at.error if e.value.startswith("**DOWN")]
    assert banner.startswith("**DOWN: Triton was stopped by alice (dashboard) at ")
    assert "from the Stack page" in banner and "is the URL right" not in banner
    assert "DOWN" in sidebar(at)

    models = run(page("models"))
    (error,) = [e.value for e in models.error]
    assert error.startswith("Triton was stopped by alice (dashboard)")
    assert "**Next step:** see the Stack page" in error and "geadmin up`)" not in error


def test_a_stack_triton_stopped_by_a_signal_is_named_with_the_way_out(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path
) -> None:
    """SIGSTOP (or a debugger) leaves Triton's sockets open and its calls unanswered: the
    verdict says what its process is doing and how it goes on, not only "did not answer"."""
    server = triton_factory()
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    Workspace(home).write_stack(stack_info(home, server.http_url, "running", (), server.pid))
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    try:
        at = run(page("overview"))
        (banner,) = [e.value for e in at.error if e.value.startswith("**DOWN")]
        assert banner.startswith(f"**DOWN: Triton (pid {server.pid}) is stopped by a signal (SIGSTOP, or a "
                                 "debugger holds it)")
        assert f"`kill -CONT {server.pid}` lets it go on" in banner
        status = geadmin("status", home=home)
        assert status.returncode == 3, status.stderr
        first = status.stdout.splitlines()[0]
        assert first.startswith(f"DOWN: Triton (pid {server.pid}) is stopped by a signal"), status.stdout
        models = run(page("models"))
        assert [e.value for e in models.error if e.value.startswith(f"Triton (pid {server.pid}) is stopped")]
    finally:
        os.kill(server.pid, signal.SIGCONT)


def test_a_stack_triton_that_runs_but_does_not_answer_is_called_hung_with_its_log(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path
) -> None:
    """The stack's Triton process runs, and its port takes connections but answers nothing
    (a listener that never accepts stands for the hung server: the process is the real one)."""
    server = triton_factory()
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)  # connections complete in the kernel's backlog; nothing ever reads them
        url = f"http://127.0.0.1:{hung.getsockname()[1]}"
        Workspace(home).write_stack(stack_info(home, url, "running", (), server.pid))
        status = geadmin("status", home=home)
    first = status.stdout.splitlines()[0]
    assert first.startswith(f"DOWN: Triton (pid {server.pid}) runs but does not answer: it is hung or "
                            "overloaded — the end of its log"), status.stdout
    assert "restart it (`geadmin stack restart triton`, or the Stack page)" in first


def test_a_gone_model_whose_name_is_markup_shows_the_name_as_written(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model's name is a directory name anyone who ships a model picks, and a gone model's
    name comes from Triton's statistics alone: on the drift cards of the Overview and the
    Models page it stays text, never a colour directive. (Parentheses, as in a link, are not
    tried: the python backend's stub launcher cannot start such a model.)"""
    planted = ":red[FAKE]"
    add_python_model(sample_repository, planted)
    server = point_at(monkeypatch, triton_factory(repository=sample_repository, models=[planted]))
    (server.repository / planted).rename(server.repository.parent / "away")  # gone while it serves
    for name in ("overview", "models"):
        at = run(page(name))
        shown = [w.value for w in at.warning if "FAKE" in w.value]
        cards = [w for w in shown if w.startswith("**:red\\[FAKE\\]** — ")]
        assert cards, (name, shown)
        for text in shown:  # the drift card, and on the Overview the banner with its fix
            assert ":red[" not in text, (name, text)
