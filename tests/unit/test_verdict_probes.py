"""An OK verdict says whether a recent synthetic probe checked that the READY models answer
(diagnose.probe_check): with no probe recorded, or only stale ones, its headline says it was
not checked and how to turn the probes on, and `--json` has it in `probe_check`; it stays OK."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.status import exit_code, render_text
from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import ServerSnapshot
from geadmin.diagnose.probe_check import stale_after
from geadmin.diagnose.verdict import Level, Verdict, VerdictRule
from geadmin.domain import ModelEntry, ModelState, ServerInfo
from geadmin.telemetry.history import watch
from geadmin.telemetry.history.watch import ProbeRecord

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
URL = "http://h:8000"
READY = ModelEntry("digits_classifier", "1", ModelState.READY, "")
UNCHECKED = "not checked whether they answer requests"


def verdict(home: Path, *models: ModelEntry, interval_s: float = 30.0) -> Verdict:
    snap = ServerSnapshot("s", URL, "http", NOW, live=True, ready=True,
                          info=ServerInfo("triton", "2.51.0", ()), models=models or (READY,))
    return assess(snap, EvidenceSources(home=home, now=NOW, probe_interval_s=interval_s))


def probed(home: Path, seconds_ago: float, *, ok: bool = True, model: str = "digits_classifier",
           server: str = URL) -> None:
    at = (NOW - timedelta(seconds=seconds_ago)).timestamp()
    watch.record_probes([ProbeRecord(server, model, at, ok, 3.0 if ok else None, "" if ok else "boom")],
                        home=home)


def test_with_no_probe_recorded_ok_says_answers_were_not_checked_and_how_to_check(tmp_path: Path) -> None:
    found = verdict(tmp_path)
    assert found.level is Level.OK and exit_code(found) == ExitCode.OK  # a note, not a page
    first = render_text(found).splitlines()[0]
    assert first.startswith("OK: Triton serves; 1 model(s) READY, none failed, ")
    assert f"{UNCHECKED}: no synthetic probe of {URL} is recorded" in first, first
    assert "to check, run the sampler" in first and "`geadmin up`" in first
    assert f"`geadmin sampler --url {URL}`" in first
    check = found.to_json()["probe_check"]
    assert isinstance(check, dict) and check["checked"] is False and check["latest_at"] is None
    assert check["stale_after_s"] == 90.0 and check["note"].startswith(UNCHECKED)
    assert "geadmin sampler" in check["fix"]
    assert found.notes == ()  # its own field, not one of the notes


def test_a_recent_probe_is_a_check_and_the_headline_says_nothing_more(tmp_path: Path) -> None:
    probed(tmp_path, 20)
    found = verdict(tmp_path)
    assert found.level is Level.OK and UNCHECKED not in found.headline, found.headline
    check = found.to_json()["probe_check"]
    assert isinstance(check, dict) and check["checked"] is True and check["note"] == "" and check["fix"] == ""
    assert check["age_s"] == 20.0


def test_probes_older_than_three_intervals_say_the_sampler_stopped_probing(tmp_path: Path) -> None:
    probed(tmp_path, 120)
    found = verdict(tmp_path)  # every 30 s: stale after 90 s
    assert found.level is Level.OK
    assert (f"{UNCHECKED}: the newest synthetic probe of {URL} is 2 min old (at 11:58:00 UTC; more than "
            "1 min 30 s, 3 probe intervals)") in found.headline, found.headline
    assert verdict(tmp_path, interval_s=60.0).probe_check.checked  # type: ignore[union-attr]  # 3 min


def test_the_limit_follows_the_probe_interval_within_a_minute_and_the_fresh_window() -> None:
    assert stale_after(30.0) == 90.0
    assert stale_after(5.0) == 60.0  # a round of many models takes a few probe timeouts
    assert stale_after(600.0) == watch.FRESH_S  # older than that, the verdict does not read them at all


def test_only_probes_of_this_servers_ready_models_count(tmp_path: Path) -> None:
    probed(tmp_path, 5, server="http://other:8000")
    probed(tmp_path, 5, model="unloaded_since")
    assert not verdict(tmp_path).probe_check.checked  # type: ignore[union-attr]


def test_with_no_ready_model_there_is_nothing_to_check(tmp_path: Path) -> None:
    idle = ModelEntry("text_normalize", "", ModelState.NOT_LOADED, "")
    found = verdict(tmp_path, idle)
    assert found.level is Level.OK and UNCHECKED not in found.headline
    assert found.to_json()["probe_check"] is None


def test_a_degraded_verdict_keeps_its_meaning_and_its_headline(tmp_path: Path) -> None:
    probed(tmp_path, 10, ok=False)
    found = verdict(tmp_path)
    assert found.rules == [VerdictRule.NOT_ANSWERING]
    assert found.headline.startswith("DEGRADED: model 'digits_classifier' is READY but does not answer: boom")
    assert UNCHECKED not in found.headline
    assert found.to_json()["probe_check"]["checked"] is True  # type: ignore[index]

    failed = ModelEntry("broken", "1", ModelState.UNAVAILABLE, "bad enum")
    unprobed = verdict(tmp_path / "fresh", READY, failed)
    assert unprobed.rules == [VerdictRule.MODEL_FAILED] and UNCHECKED not in unprobed.headline
    assert unprobed.to_json()["probe_check"]["checked"] is False  # type: ignore[index]


def test_an_unreadable_workspace_says_it_once_in_its_own_note(tmp_path: Path) -> None:
    (tmp_path / "geadmin.db").write_bytes(b"\x8f" * 5000)
    found = verdict(tmp_path)
    assert found.level is Level.OK and UNCHECKED not in found.headline
    assert "probes and NPU faults are not judged" in found.headline
    check = found.to_json()["probe_check"]
    assert isinstance(check, dict) and check["checked"] is False and "cannot be read" in check["note"]


def test_a_failed_probe_recorded_under_another_name_of_the_server_still_pages(tmp_path: Path) -> None:
    """The sampler records the stack's HTTP URL at 127.0.0.1; `status --url localhost:...` or
    `--url grpc://...` names the same server: a model not answering there was OK with a note that
    no probe was recorded."""
    probed(tmp_path, 10, ok=False, server="http://127.0.0.1:8000")
    for url, also in (("http://localhost:8000", ()), ("grpc://127.0.0.1:8001", ("http://127.0.0.1:8000",)),
                      ("grpc://[::1]:8001", ("http://localhost:8000",))):
        snap = ServerSnapshot("s", url, url.split(":")[0], NOW, live=True, ready=True,
                              info=ServerInfo("triton", "2.51.0", ()), models=(READY,))
        found = assess(snap, EvidenceSources(home=tmp_path, now=NOW, probe_interval_s=30.0, also=also))
        assert found.rules == [VerdictRule.NOT_ANSWERING], (url, found.headline)
    other = ServerSnapshot("s", "grpc://127.0.0.1:8001", "grpc", NOW, live=True, ready=True,
                           info=ServerInfo("triton", "2.51.0", ()), models=(READY,))
    alone = assess(other, EvidenceSources(home=tmp_path, now=NOW, probe_interval_s=30.0))
    assert alone.level is Level.OK and UNCHECKED in alone.headline  # its HTTP endpoint not known: not guessed


def test_server_keys_name_one_server_under_each_loopback_name_only() -> None:
    from geadmin.domain import server_keys

    assert server_keys("localhost:8000") == ("http://127.0.0.1:8000", "http://localhost:8000",
                                             "http://[::1]:8000")
    assert server_keys("grpc://10.0.0.5:8001", "http://10.0.0.5:8000") == ("grpc://10.0.0.5:8001",
                                                                          "http://10.0.0.5:8000")
    assert server_keys("htp:/nope", "") == ()
