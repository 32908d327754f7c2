"""The Fleet page against three real tritonservers (tests/support/fleet_lab.py): a rollout is
shown (fleet, servers, waves, the diff) and asked for, and only "Confirm rollout" starts it; a
fleet with a read-only member says the rollout will be refused before Start; when the fleet
cannot be read, the last reading stays, marked, and the page recovers by itself.

The headline turning DEGRADED by itself when a server stops is a browser test
(tests/e2e/test_fleet_browser.py): AppTest reruns the whole page, never a fragment alone."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.diagnose import rollouts
from geadmin.fleet import runs
from tests.support.apptest import APP, isolate, run
from tests.support.fleet_lab import BASE, MODEL, FleetLab, config, fleet_lab
from tests.support.markdown_render import render
from tests.support.processes import wait_for

pytestmark = pytest.mark.integration

FLEET = "pagelab"  # its own name: the rollout registry (geadmin.fleet.runs) is per process
WILD = "wild"  # b found by DNS first, with no proof of membership: read-only; a and c configured


@dataclass
class Lab:
    lab: FleetLab
    servers_file: Path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with fleet_lab(tmp_path_factory.mktemp("fleet_page")) as started:
        port = started.servers["b"].http_url.rsplit(":", 1)[1]
        with started.servers_file.open("a") as file:
            file.write(f'\n[[fleet]]\nname = "{FLEET}"\nsources = ["servers"]\n'
                       f'\n[[fleet]]\nname = "{WILD}"\nsources = ["dns:127.0.0.2:{port}", "servers"]\n')
        yield Lab(started, started.servers_file)


@pytest.fixture
def fleet_page(lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AppTest]:
    isolate(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(lab.servers_file))
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("fleet.py")
    run(at)
    yield at



def no_rollout(home: Path) -> bool:
    """No rollout journaled and no fleet change audited in `home`."""
    return rollouts.journals(home=home) == [] and not any(
        e.action.startswith("fleet ") for e in audit.query(home=home))


def button(at: AppTest, label: str) -> Any:
    matches = [b for b in at.button if b.label == label]
    assert matches, f"no button {label!r}; have {[b.label for b in at.button]}"
    return matches[0]


def choose(at: AppTest, label: str, value: object) -> None:
    next(s for s in [*at.selectbox, *at.number_input, *at.text_area] if s.label == label).set_value(value)


def test_a_rollout_is_shown_and_asked_for_and_only_confirm_starts_it(
    lab: Lab, fleet_page: AppTest, tmp_path: Path
) -> None:
    at, home = fleet_page, tmp_path / "home"
    choose(at, "Fleet", FLEET)
    run(at)
    assert at.success and at.success[0].value.startswith("FLEET OK: 3 servers"), [e.value for e in at.error]
    assert any(c.value.startswith("As of ") for c in at.caption), [c.value for c in at.caption]
    choose(at, "Change", "apply")
    choose(at, "Latency slack (ms)", 10_000)
    choose(at, "New config.pbtxt (apply)", config("v2"))
    run(at)  # what a keyboard submit in the text area does now: a rerun, nothing started
    button(at, "Start rollout…").click()
    run(at)
    asked = [w.value for w in at.warning]
    assert f"Roll out apply {MODEL} on fleet '{FLEET}': 3 server(s) in 3 wave(s) " \
           "(wave 1: a; wave 2: b; wave 3: c)?" in asked, asked
    assert any('+parameters { key: "mode" value { string_value: "v2" } }' in c.value for c in at.code)
    assert any("1 line(s) added, 1 removed" in m.value for m in at.markdown)
    assert runs.latest(FLEET) is None and no_rollout(home)
    assert lab.lab.files() == (BASE.encode(), BASE.encode())
    try:
        button(at, "Confirm rollout").click()
        run(at)
        assert wait_for(lambda: (r := runs.latest(FLEET)) is not None and not r.running, 180)
        run(at)
        assert any(s.value.startswith(f"ROLLOUT DONE: apply {MODEL} on 3 server(s)") for s in at.success), \
            [e.value for e in at.error]
        assert lab.lab.files() == (config("v2").encode(),) * 2
        assert audit.query(action="fleet apply", home=home)
    finally:
        lab.lab.put_back()


def test_an_edit_after_start_drops_the_question(lab: Lab, fleet_page: AppTest) -> None:
    at = fleet_page
    choose(at, "Fleet", FLEET)
    choose(at, "Change", "reload")
    run(at)
    button(at, "Start rollout…").click()
    run(at)
    assert button(at, "Confirm rollout")
    choose(at, "Wave size", 2)  # what was shown is no longer what would run
    run(at)
    assert not [b for b in at.button if b.label == "Confirm rollout"]


def test_a_fleet_with_a_read_only_member_says_the_rollout_will_be_refused_before_start(
    lab: Lab, fleet_page: AppTest
) -> None:
    at = fleet_page
    choose(at, "Fleet", WILD)
    run(at)
    trust = next(d.value for d in at.dataframe if "trust" in d.value.columns)
    assert sorted(trust["trust"]) == ["read-only", "trusted", "trusted"], trust
    [refusal] = [e.value for e in at.error if e.value.startswith("This rollout will be refused")]
    assert "refused before anything changed: 1 member(s) not proven to belong" in refusal, refusal
    assert "127.0.0.2" in refusal and "trusted_networks" in refusal and f"({WILD})" in refusal, refusal
    assert "127.0.0.1" not in refusal and "127.0.0.3" not in refusal, refusal  # only the read-only one
    assert button(at, "Start rollout…").disabled


def test_a_fleet_that_cannot_be_read_keeps_the_last_reading_marked_and_the_page_recovers(
    lab: Lab, fleet_page: AppTest
) -> None:
    at, text = fleet_page, lab.servers_file.read_text()
    choose(at, "Fleet", FLEET)
    run(at)
    try:  # a fleet table gone wrong: no fleet can be read (the servers, and so the app, still can)
        lab.servers_file.write_text(text + '\n[[fleet]]\nname = "typo"\nsources = ["dns-triton:8000"]\n')
        run(at)
        assert any(w.value.startswith("Showing the fleet as of ") for w in at.warning), \
            [w.value for w in at.warning]
        assert any("unknown fleet source 'dns-triton:8000'" in e.value for e in at.error), \
            [e.value for e in at.error]
        assert at.success and at.success[0].value.startswith("FLEET OK: 3 servers")  # as last read
        assert at.dataframe[0].value.loc[MODEL, "a"].startswith("READY")
        assert button(at, "Start rollout…").disabled
    finally:
        lab.servers_file.write_text(text)
    run(at)
    assert not any(w.value.startswith("Showing the fleet as of ") for w in at.warning)
    assert any(c.value.startswith("As of ") for c in at.caption)
    assert not button(at, "Start rollout…").disabled


def fleet_with_a_hostile_config_value() -> None:
    from datetime import datetime, timezone

    from tritonclient.grpc import model_config_pb2 as mc

    from geadmin.diagnose.health import ServerSnapshot
    from geadmin.domain import ModelEntry, ModelState
    from geadmin.fleet.config_skew import ServedConfig, normalized
    from geadmin.fleet.discovery import Discovery, Fleet
    from geadmin.fleet.members import Member, Trust
    from geadmin.fleet.status import FleetStatus, ServerView
    from geadmin.triton.servers import ServerSpec
    from pages.fleet import show_status

    def view(name: str, mode: str) -> ServerView:
        config = mc.ModelConfig(name="echo", max_batch_size=8)
        config.parameters["mode"].string_value = mode
        snap = ServerSnapshot(name, f"http://{name}:8000", "http", datetime.now(timezone.utc), live=True,
                              ready=True, models=(ModelEntry("echo", "1", ModelState.READY, ""),))
        member = Member(ServerSpec(name, f"http://{name}:8000"), "servers", trust=Trust(True, "configured"))
        return ServerView(member, snap, configs={"echo": ServedConfig(normalized(config))})

    views = (view("a", "\n\n# FLEET OK\n*all* fine " + "y" * 500), view("b", "v1"))
    show_status(FleetStatus(Discovery(Fleet("f", ("servers",)), tuple(v.member for v in views), ()), views,
                            0.1, configs_compared=True))


def test_a_config_value_a_member_chose_is_shown_as_one_line_of_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A parameter "\\n\\n# FLEET OK\\n*all* fine ..." is no heading in the headline, no emphasis in
    the Config skew lines: their characters, on one line, cut."""
    isolate(monkeypatch, tmp_path)
    at = AppTest.from_function(fleet_with_a_hostile_config_value, default_timeout=60).run()
    assert not at.exception, at.exception
    headline = render(at.error[0].value)
    assert headline.constructs == [] and "# FLEET OK *all* fine" in headline.words, headline
    (skew,) = [m.value for m in at.markdown if m.value.startswith("**Config skew**")]
    shown = render(skew)
    assert "heading_open" not in shown.constructs and "em_open" not in shown.constructs, shown.constructs
    assert "# FLEET OK *all* fine" in shown.words and len(shown.words) < 300
