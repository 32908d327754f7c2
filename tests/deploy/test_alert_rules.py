"""The shipped alert rules (deploy/prometheus/geadmin-alerts.yml), checked and unit-tested by
Debian's promtool: every rule has a unit test that makes it fire, a summary, a description
that names the likely cause, and a runbook link to a page the dashboard really serves."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "geadmin-alerts.yml"
RULE_TESTS = Path(__file__).parent / "prometheus" / "geadmin-alerts.test.yml"
PROMETHEUS_CONFIG = ROOT / "deploy" / "prometheus.yml"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool is missing: `make test-deps` installs Debian's prometheus package"
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, check=False)


def rules() -> list[dict[str, object]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_promtool_checks_the_rules_and_the_prometheus_config() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout
    config = promtool("check", "config", "--syntax-only", str(PROMETHEUS_CONFIG))
    assert config.returncode == 0, config.stdout + config.stderr


def test_promtool_unit_tests_pass() -> None:
    tested = promtool("test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_rule_has_a_unit_test_that_makes_it_fire() -> None:
    fired = {case["alertname"] for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
             for case in test.get("alert_rule_test", []) if case.get("exp_alerts")}
    assert {str(rule["alert"]) for rule in rules()} == fired


def test_every_rule_explains_itself_and_links_to_a_page_the_dashboard_serves() -> None:
    served = set(re.findall(r'url_path="([a-z_]+)"', (ROOT / "pages" / "app.py").read_text()))
    for rule in rules():
        notes = rule["annotations"]
        assert isinstance(notes, dict) and notes.get("summary") and notes.get("description"), rule["alert"]
        link = str(notes["runbook_url"])
        target = re.sub(r"\{\{.*?\}\}", "", link.split("{{ end }}", 1)[1])  # after the dashboard address
        path = urlsplit("http://x" + target).path.strip("/")
        assert path in served, f"{rule['alert']}: {path!r} is not a dashboard page"


def test_a_broken_rule_file_fails_the_check(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(RULES.read_text().replace("geadmin_probe_success == 0", "geadmin_probe_success == ("))
    assert promtool("check", "rules", str(broken)).returncode != 0
    wrong = tmp_path / "wrong.yml"  # a rule that no longer fires: its unit test fails
    wrong.write_text(RULES.read_text().replace("state=\"UNAVAILABLE\", operator_unload=\"false\"",
                                               "state=\"UNAVAILABLE\", operator_unload=\"never\""))
    case = tmp_path / "case.test.yml"
    shipped = "../../../deploy/prometheus/geadmin-alerts.yml"
    case.write_text(RULE_TESTS.read_text().replace(shipped, str(wrong)))
    assert promtool("test", "rules", str(case)).returncode != 0
