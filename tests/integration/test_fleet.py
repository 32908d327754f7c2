"""The fleet against three real tritonservers: `a` and `b` read one repository (a shared
volume), `c` its own. All three listen on the same ports, on 127.0.0.1, .2 and .3, as
replicas on three hosts do — so the Prometheus and DNS sources can address them by host.

c's copy of the `echo` model is an older one that refuses `mode: "v2"` at load: a rollout
of that config passes a and b and is rejected on c, the case where a rollout must stop and
put every server back. `answer: "error"` loads everywhere but fails every request."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import threading
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.access import guard
from geadmin.access.identity import Identity, Mode
from geadmin.access.roles import GuardedAction, Role
from geadmin.access.users import UsersFile
from geadmin.errors import (
    ConfigError,
    FleetError,
    InvalidArgumentError,
    RolloutBusyError,
    RolloutRefusedError,
)
from geadmin.fleet import runs
from geadmin.fleet.discovery import Fleet, discover, fleet_named
from geadmin.fleet.gate import GateSettings
from geadmin.fleet.members import Member, Trust
from geadmin.fleet.polling import poll
from geadmin.fleet.rollout import Change, RolloutResult, rollout
from geadmin.fleet.versions import roll_version
from geadmin.fleet.wave import Control
from geadmin.ops.infer.request import smoke_request
from geadmin.stack.processes import free_ports
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from geadmin.triton.servers import ServerSpec
from tests.support.apptest import APP, button, isolate, run
from tests.support.index_reads import BEFORE, counting
from tests.support.processes import TEST_EXIT_TIMEOUT_S, triton_ports_free_on, wait_for
from tests.support.prometheus import PrometheusServer
from tests.support.stack import GEADMIN, geadmin, in_process

pytestmark = pytest.mark.integration

MODEL, PIPE = "echo", "echo_pipe"
HOSTS = {"a": "127.0.0.1", "b": "127.0.0.2", "c": "127.0.0.3"}
# The gate's latency rule is tested on its own (tests/unit/test_fleet.py); here, where CI's
# other worker shares the 2 cores, a rollout is judged by READY and answers only.
LOOSE = GateSettings(latency_slack_ms=10_000)

MODEL_PY = '''import json
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"]).get("parameters", {})
        self.fail = params.get("answer", {}).get("string_value") == "error"
        mode = params.get("mode", {}).get("string_value")
        if OLD and mode == "v2":
            raise pb_utils.TritonModelException("this copy of echo predates mode v2")

    def execute(self, requests):
        if self.fail:
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError("answer=error")) for _ in requests]
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy() * 2)]) for r in requests]
'''


def config(**params: str) -> str:
    lines = [f'parameters {{ key: "{k}" value {{ string_value: "{v}" }} }}' for k, v in params.items()]
    return (f'name: "{MODEL}"\nbackend: "python"\nmax_batch_size: 0\n'
            'input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n'
            'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\n' + "\n".join(lines) + "\n")


BASE = config(mode="v1")
PIPE_CONFIG = (f'name: "{PIPE}"\nplatform: "ensemble"\nmax_batch_size: 0\n'
               'input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n'
               'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\n'
               f'ensemble_scheduling {{ step [{{ model_name: "{MODEL}" model_version: -1 '
               'input_map { key: "x" value: "x" } output_map { key: "y" value: "y" } }] }\n')


def make_repository(root: Path, *, old: bool) -> Path:
    (root / MODEL / "1").mkdir(parents=True)
    (root / MODEL / "config.pbtxt").write_text(BASE)
    (root / MODEL / "1" / "model.py").write_text(f"OLD = {old}\n" + MODEL_PY)
    (root / PIPE / "1").mkdir(parents=True)
    (root / PIPE / "config.pbtxt").write_text(PIPE_CONFIG)
    return root


@dataclass
class Lab:
    servers: dict[str, TritonProcess]
    shared: Path
    own: Path
    home: Path
    servers_file: Path

    def client(self, name: str) -> TritonClient:
        return TritonClient(self.servers[name].http_url, timeout_s=30)

    def members(self) -> list[Member]:
        return list(discover(fleet_named("lab")).members)

    def mode_served(self, name: str) -> str:
        with self.client(name) as client:
            return client.model_config(MODEL).parameters["mode"].string_value

    def loaded_afresh(self) -> None:
        """Unloads and loads both models everywhere: each server counts its requests (and the
        p99 the outlier check compares) since the load, and earlier tests' gate requests on a
        starved host can make one server's p99 stand out."""
        for name in self.servers:
            with self.client(name) as client:
                client.unload(PIPE)
                client.unload(MODEL)
                # Triton answers an unload while the model is still UNLOADING (seen here); the
                # load waits for it to be gone (one run's c still counted 34 requests after it)
                assert wait_for(lambda: not [m for m in client.repository_index() if m.name in (MODEL, PIPE)
                                             and m.state.value in ("READY", "UNLOADING")], 60)
                client.load(MODEL)
                client.load(PIPE)
        counted = {s.name: s.figures[MODEL].requests for s in poll(discover(fleet_named("lab"))).servers
                   if MODEL in s.figures}
        assert set(counted.values()) <= {0}, f"a fresh load still counts earlier requests: {counted}"

    def put_back(self) -> None:
        for repo in (self.shared, self.own):
            (repo / MODEL / "config.pbtxt").write_text(BASE)
        for name in self.servers:
            with self.client(name) as client:
                client.load(MODEL)
                client.load(PIPE)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("fleet")
    shared, own = make_repository(root / "shared", old=False), make_repository(root / "own", old=True)
    ports = triton_ports_free_on(*HOSTS.values())
    servers = {}
    try:
        for name, host in HOSTS.items():
            servers[name] = TritonProcess(own if name == "c" else shared, host=host, ports=ports,
                                          models=[MODEL, PIPE], log_path=root / f"{name}.log",
                                          exit_timeout_s=TEST_EXIT_TIMEOUT_S)
            servers[name].start()
        servers_file = root / "servers.toml"
        servers_file.write_text("".join(
            f'[[server]]\nname = "{n}"\nurl = "{s.http_url}"\nmetrics_url = "{s.metrics_url}"\n'
            f'repository = "{own if n == "c" else shared}"\n\n' for n, s in servers.items())
            + '[[fleet]]\nname = "lab"\nsources = ["servers"]\n')
        home = root / "home"
        saved = {k: os.environ.get(k) for k in ("GEADMIN_SERVERS_FILE", "GEADMIN_HOME")}
        os.environ.update(GEADMIN_SERVERS_FILE=str(servers_file), GEADMIN_HOME=str(home))
        try:
            yield Lab(servers, shared, own, home, servers_file)
        finally:
            for key, value in saved.items():
                os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture
def fresh(lab: Lab) -> Iterator[Lab]:
    yield lab
    lab.put_back()


def test_status_is_the_model_by_server_matrix_and_says_skew_plainly(fresh: Lab) -> None:
    status = poll(discover(fleet_named("lab")))
    assert [s.name for s in status.servers] == ["a", "b", "c"] and status.down() == []
    assert {s.name: s.cell(MODEL) for s in status.servers} == {n: ("READY", "1") for n in HOSTS}
    assert status.skew() == [] and status.headline().startswith("FLEET OK: 3 servers, 2 models")
    with fresh.client("c") as client:
        client.unload(PIPE)
        # over HTTP the unload answers while the model is UNLOADING, and Triton's strict readiness
        # counts it until it is gone: wait for the state the test is about (a busy CI host saw it)
        assert wait_for(lambda: client.is_ready() and {m.state.value for m in client.repository_index()
                                                       if m.name == PIPE} == {"UNAVAILABLE"}, 30)
    status = poll(discover(fleet_named("lab")))
    assert status.skew() == [f"{PIPE}: READY on 2 of 3; not READY on c"]
    assert status.headline().startswith("FLEET DEGRADED: 3 of 3 servers serving; 0 model(s) failed, 1 skewed")
    result = in_process("fleet", "status", "--fleet", "lab", "--json", home=fresh.home)
    assert result.returncode == 4 and "Traceback" not in result.stderr, result.stderr
    document = json.loads(result.stdout)
    assert document["matrix"][PIPE]["c"] == {"state": "UNAVAILABLE", "version": "1"}
    assert document["skew"] == [f"{PIPE}: READY on 2 of 3; not READY on c"]


def test_geadmin_status_takes_a_fleet_and_exits_with_its_worst_server(fresh: Lab) -> None:
    result = in_process("status", "--fleet", "lab", "--json", home=fresh.home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [(d["server"], d["verdict"]) for d in json.loads(result.stdout)] == [(n, "OK") for n in HOSTS]
    # c's file changed by hand, not applied: drift on c alone, and the exit code is DEGRADED's
    (fresh.own / MODEL / "config.pbtxt").write_text(config(mode="v1", answer="error"))
    result = in_process("status", "--fleet", "lab", home=fresh.home)
    assert result.returncode == 4 and "Traceback" not in result.stderr, result.stdout + result.stderr
    sections = result.stdout.split("\n\n")
    assert [s.splitlines()[0] for s in sections] == ["[a]", "[b]", "[c]"]
    assert "DRIFT: echo" in sections[2] and "DRIFT" not in sections[0] + sections[1]
    refused = in_process("status", "--fleet", "nope", home=fresh.home)
    assert refused.returncode == 2 and "nope" in refused.stderr and "Traceback" not in refused.stderr


def test_probes_reach_every_server_of_the_fleet_and_name_the_one_that_does_not_answer(fresh: Lab) -> None:
    urls = {name: server.http_url for name, server in fresh.servers.items()}
    result = in_process("probe", "--fleet", "lab", "--once", "--json", home=fresh.home)
    assert result.returncode == 0, result.stdout + result.stderr
    rounds = json.loads(result.stdout)
    assert sorted(r["server"] for r in rounds) == sorted(urls.values())
    assert all(p["ok"] for r in rounds for p in r["probes"]) and all(len(r["probes"]) == 2 for r in rounds)
    # c reloads a config whose model answers every request with an error: READY all the same
    (fresh.own / MODEL / "config.pbtxt").write_text(config(mode="v1", answer="error"))
    with fresh.client("c") as client:
        client.load(MODEL)
    result = in_process("probe", "--fleet", "lab", "--once", home=fresh.home)
    assert result.returncode == 1, result.stdout + result.stderr
    sections = {section.splitlines()[0]: section.splitlines()[1] for section in result.stdout.split("\n\n")}
    assert sections[f"[{urls['c']}]"].startswith(f"FAILED: {MODEL} is READY but does not answer: ")
    assert sections[f"[{urls['a']}]"].startswith("OK") and sections[f"[{urls['b']}]"].startswith("OK")


def test_a_sampler_with_a_fleet_probes_every_server_and_exports_each(fresh: Lab, tmp_path: Path) -> None:
    port = free_ports(1)[0]
    env = {**os.environ, "GEADMIN_HOME": str(tmp_path / "home")}  # no probe recorded before it
    sampler = subprocess.Popen([*GEADMIN, "sampler", "--fleet", "lab", "--metrics-port", str(port),
                                "--metrics-url", fresh.servers["a"].metrics_url,  # its history: one server's
                                "--probe-interval", "5"], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def probed_servers() -> set[str]:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                return set()
            return {line.split('server="')[1].split('"')[0] for line in page.splitlines()
                    if line.startswith("geadmin_probe_success{") and line.endswith(" 1.0")}
        assert wait_for(lambda: len(probed_servers()) == 3, 60), probed_servers()
        assert probed_servers() == {s.http_url for s in fresh.servers.values()}
    finally:
        sampler.terminate()
        output = sampler.communicate(timeout=30)[0]
    assert "probing the READY models of every server of the lab fleet" in output, output


def test_a_server_down_and_one_that_hangs_are_reported_without_holding_up_the_view(
    fresh: Lab, tmp_path: Path
) -> None:
    hung = socket.socket()  # accepts connections (the backlog), never answers one
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, not listening: connection refused
    try:
        urls = ",".join([f"a={fresh.servers['a'].http_url}", f"hung=http://127.0.0.1:{hung.getsockname()[1]}",
                         f"gone=http://127.0.0.1:{closed.getsockname()[1]}"])
        saved = os.environ.pop("GEADMIN_SERVERS_FILE")
        os.environ["GEADMIN_TRITON_URLS"] = urls
        try:
            status = poll(discover(Fleet("t", ("servers",))), timeout_s=2.0)
        finally:
            os.environ.pop("GEADMIN_TRITON_URLS")
            os.environ["GEADMIN_SERVERS_FILE"] = saved
    finally:
        hung.close()
        closed.close()
    problems = {s.name: s.problem for s in status.servers}
    assert problems["a"] == ""
    assert "unreachable" in problems["gone"] and "refused" in problems["gone"].lower(), problems
    assert problems["hung"], problems  # timed out or no answer by the deadline
    assert status.taken_s < 20  # bounded by the poll timeout, not by the hung server
    assert status.headline().startswith("FLEET DEGRADED: 1 of 3 servers serving")


def test_a_good_apply_rolls_out_in_waves_writing_a_shared_repository_once(fresh: Lab) -> None:
    new = config(mode="v1.1")
    result = rollout(fresh.members(), Change.APPLY, MODEL, new_config=new.encode(), wave_size=2,
                     gate=LOOSE, auth=guard.os_user(), fleet="lab", home=fresh.home)
    assert result.ok and result.waves == 2, result.to_json()
    assert [(r.server, r.wave, r.outcome) for r in result.rows] == [("a", 1, "changed"), ("b", 1, "changed"),
                                                                    ("c", 2, "changed")]
    assert (fresh.shared / MODEL / "config.pbtxt").read_text() == new
    assert (fresh.own / MODEL / "config.pbtxt").read_text() == new
    assert {fresh.mode_served(n) for n in HOSTS} == {"v1.1"}
    entry = audit.query(action="fleet apply", home=fresh.home)[0]
    assert entry.result == "ok" and entry.id == result.audit_id
    assert all(f"  {n}: wave" in entry.message for n in HOSTS)


def test_a_config_triton_rejects_on_one_server_stops_the_rollout_and_puts_every_server_back(
    fresh: Lab
) -> None:
    shared_before = (fresh.shared / MODEL / "config.pbtxt").read_bytes()
    own_before = (fresh.own / MODEL / "config.pbtxt").read_bytes()
    result = rollout(fresh.members(), Change.APPLY, MODEL, new_config=config(mode="v2").encode(), wave_size=1,
                     gate=LOOSE, auth=guard.os_user(), fleet="lab", home=fresh.home)
    assert not result.ok
    assert result.headline.startswith("ROLLOUT STOPPED at wave 3 of 3: c: "), result.headline
    assert "predates mode v2" in result.headline, result.headline  # Triton's reason, first line
    assert {r.server: r.outcome for r in result.rows} == {"a": "restored", "b": "restored", "c": "restored"}
    assert (fresh.shared / MODEL / "config.pbtxt").read_bytes() == shared_before  # byte-identical
    assert (fresh.own / MODEL / "config.pbtxt").read_bytes() == own_before
    assert {fresh.mode_served(n) for n in HOSTS} == {"v1"}  # reloaded with the old file
    assert audit.query(action="fleet apply", home=fresh.home)[0].result == "rolled_back"


def test_a_config_that_loads_but_cannot_answer_stops_at_the_first_gate(fresh: Lab) -> None:
    result = rollout(fresh.members(), Change.APPLY, MODEL,
                     new_config=config(mode="v1", answer="error").encode(), wave_size=1,
                     gate=GateSettings(requests=2, latency_slack_ms=10_000), auth=guard.os_user(),
                     fleet="lab", home=fresh.home)
    assert not result.ok, result.headline
    assert result.headline.startswith("ROLLOUT STOPPED at wave 1 of 3: a: "), result.headline
    outcomes = {r.server: r.outcome for r in result.rows}
    assert outcomes == {"a": "restored", "b": "not reached", "c": "not reached"}
    assert (fresh.shared / MODEL / "config.pbtxt").read_text() == BASE
    for name in HOSTS:
        with fresh.client(name) as client:
            assert client.model_ready(MODEL)
    assert "answer" not in fresh.client("b").model_config(MODEL).parameters


def test_an_unload_that_takes_an_ensemble_down_fails_its_gate_and_both_come_back(fresh: Lab) -> None:
    result = rollout(fresh.members(), Change.UNLOAD, MODEL, wave_size=1, gate=LOOSE, auth=guard.os_user(),
                     fleet="lab", home=fresh.home)
    assert not result.ok and f"took down {PIPE}" in result.headline, result.headline
    with fresh.client("a") as client:
        assert client.model_ready(MODEL) and client.model_ready(PIPE)


def test_a_rollout_refuses_before_changing_anything(fresh: Lab) -> None:
    members = fresh.members()
    with pytest.raises(InvalidArgumentError, match="wave-size"):
        rollout(members, Change.RELOAD, MODEL, wave_size=0, auth=guard.os_user(), home=fresh.home)
    without = [dataclasses.replace(m, repository=None) for m in members]
    with pytest.raises(ConfigError, match="no model repository known for a, b, c"):
        rollout(without, Change.APPLY, MODEL, new_config=BASE.encode(), auth=guard.os_user(), home=fresh.home)
    gone = Member(ServerSpec("gone", f"http://127.0.0.1:{free_ports(1)[0]}"), "test",
                  trust=Trust(True, "a closed port the test trusts"))
    with pytest.raises(FleetError, match="gone does not answer, so the rollout did not start"):
        rollout([*members, gone], Change.RELOAD, MODEL, auth=guard.os_user(), home=fresh.home)
    result = geadmin("fleet", "apply", MODEL, "-", "--fleet", "lab", home=fresh.home)  # empty stdin
    assert result.returncode == 2 and "error: " in result.stderr
    assert (fresh.shared / MODEL / "config.pbtxt").read_text() == BASE


def test_the_cli_reloads_across_the_fleet(fresh: Lab) -> None:
    result = in_process("fleet", "reload", MODEL, "--fleet", "lab", "--wave-size", "2", "--latency-slack-ms",
                     "10000", home=fresh.home)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert result.stdout.startswith("ROLLOUT DONE: reload echo on 3 server(s) in 2 wave(s)")


def test_prometheus_targets_and_dns_find_the_same_servers(fresh: Lab, tmp_path: Path) -> None:
    servers = fresh.servers
    prometheus = PrometheusServer(tmp_path / "prom", [s.metrics_url for s in servers.values()], job="triton")
    prometheus.start()
    try:
        prometheus.wait_for('count(up{job="triton"} == 1) == 3')  # every target scraped once
        http, grpc = servers["a"].ports.http, servers["a"].ports.grpc
        source = f"prometheus:{prometheus.url}?job=triton&http_port={http}&grpc_port={grpc}"
        found = discover(Fleet("p", (source, f"dns:localhost:{http}")))
    finally:
        prometheus.stop()
    assert sorted(m.url for m in found.members) == sorted(s.http_url for s in servers.values()), found
    assert all(m.labels["ready"] == "true" for m in found.members if m.source.startswith("prometheus"))
    status = poll(found)
    assert status.down() == [] and status.skew() == []


def test_the_fleet_page_shows_the_matrix_and_runs_a_rollout_to_the_end(
    fresh: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, fresh.home)
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(fresh.servers_file))
    fresh.loaded_afresh()
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("fleet.py")
    run(at)
    next(s for s in at.selectbox if s.label == "Fleet").set_value("lab")
    run(at)
    assert at.success and at.success[0].value.startswith("FLEET OK: 3 servers, 2 models"), \
        [e.value for e in [*at.error, *at.warning]]
    matrix = at.dataframe[0].value
    assert list(matrix.columns) == ["a", "b", "c"] and matrix.loc[MODEL, "c"] == "READY v1"
    next(s for s in at.selectbox if s.label == "Change").set_value("reload")
    next(s for s in at.selectbox if s.label == "Model").set_value(MODEL)
    next(n for n in at.number_input if n.label == "Latency slack (ms)").set_value(10_000)
    button(at, "Start rollout…").click()  # shows what it would do and asks
    run(at)
    button(at, "Confirm rollout").click()
    run(at)
    assert wait_for(lambda: (r := runs.latest("lab")) is not None and not r.running, 120)
    run(at)
    assert any(s.value.startswith("ROLLOUT DONE: reload echo on 3 server(s)") for s in at.success), \
        [e.value for e in at.error]


def test_a_paused_rollout_waits_and_the_page_aborts_it_before_anything_changes(
    fresh: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch, fresh.home)
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(fresh.servers_file))
    members = fresh.members()

    def paused_from_the_start(control: Control, say: Callable[[str], None]) -> RolloutResult:
        control.paused.set()
        return rollout(members, Change.RELOAD, MODEL, auth=guard.os_user(), fleet="lab", home=fresh.home,
                       progress=say, control=control)

    run_ = runs.start("lab", "reload echo on 3 server(s)", "test", paused_from_the_start)
    with pytest.raises(RolloutBusyError, match="a rollout of fleet 'lab' is running"):
        runs.start("lab", "another", "test", paused_from_the_start)
    assert wait_for(lambda: run_.state == "paused" and len(run_.lines) > 0, 30)
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("fleet.py")
    run(at)
    next(s for s in at.selectbox if s.label == "Fleet").set_value("lab")
    run(at)
    assert any("(paused)" in h.value for h in at.subheader), [h.value for h in at.subheader]
    button(at, "Abort").click()
    run(at)
    assert wait_for(lambda: not run_.running, 30)
    assert run_.result is not None and not run_.result.ok
    assert run_.result.headline == ("ROLLOUT STOPPED at wave 1 of 3: aborted by the operator; "
                                    "nothing had changed")
    assert {r.outcome for r in run_.result.rows} == {"not reached"}
    [pressed] = audit.query(action="fleet abort", home=fresh.home)  # who pressed it, audited
    assert pressed.server == "lab" and pressed.message == "reload echo on 3 server(s)"
    assert any(line.startswith(f"abort by {pressed.who}") for line in run_.lines), run_.lines


def test_a_user_demoted_while_their_rollout_runs_stops_it_before_the_next_server(
    fresh: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollout ran on with the role its starter had at the click: an admin who demoted (or
    removed) them could not stop what they had started."""
    users = UsersFile(tmp_path / "users.toml")
    users.add("olga", Role.OPERATOR, "a long enough password", auth=guard.os_user())
    monkeypatch.setenv("GEADMIN_USERS_FILE", str(users.path))
    auth = guard.for_identity(Identity("olga", Role.OPERATOR, Mode.LOCAL))
    members = fresh.members()

    def paused_from_the_start(control: Control, say: Callable[[str], None]) -> RolloutResult:
        control.paused.set()
        return rollout(members, Change.RELOAD, MODEL, auth=auth, fleet="lab", home=fresh.home,
                       progress=say, control=control)

    run_ = runs.start("lab", "reload echo on 3 server(s)", "olga", paused_from_the_start,
                      held=(auth, GuardedAction.RELOAD))
    assert wait_for(lambda: run_.state == "paused", 30)
    users.set_role("olga", Role.VIEWER, auth=guard.os_user())
    run_.control.paused.clear()
    assert wait_for(lambda: not run_.running, 30)
    assert run_.result is not None and not run_.result.ok
    assert run_.result.headline == ("ROLLOUT STOPPED at wave 1 of 3: stopped: olga is viewer now, and reload "
                                    "needs operator: demoted since this started; nothing had changed")
    assert {r.outcome for r in run_.result.rows} == {"not reached"}


def test_a_new_version_rolls_out_beside_the_old_then_retires_it_without_a_gap(fresh: Lab) -> None:
    for repo in (fresh.shared, fresh.own):
        shutil.copytree(repo / MODEL / "1", repo / MODEL / "2")
    failures: list[str] = []
    answered = 0
    stop = threading.Event()

    def traffic() -> None:  # a client of server c, asking for the model (whichever version serves)
        nonlocal answered
        with TritonClient(fresh.servers["c"].http_url, timeout_s=30) as client:
            while not stop.is_set():
                result = smoke_request(client, MODEL)
                if result.ok:
                    answered += 1
                else:
                    failures.append(result.reason)

    thread = threading.Thread(target=traffic, daemon=True)
    thread.start()
    try:
        with counting() as reads:  # every repository-index read geadmin makes, per server
            result = roll_version(fresh.members(), MODEL, 2, wave_size=2, gate=LOOSE, auth=guard.os_user(),
                                  fleet="lab", home=fresh.home, progress=reads.progress)
    finally:
        stop.set()
        thread.join(30)
    try:
        assert result.ok, result.headline
        # Each step reads each server's index at most twice: the gate's before, one after its change
        # (the old versions: one read of the first server before the steps).
        steps = ["load v2 beside v1", "retire v1"]
        assert sorted(reads.counts) == sorted([*steps, BEFORE]), dict(reads.counts)
        assert sum(reads.counts[BEFORE].values()) == 1, reads.callers
        for step in steps:
            assert len(reads.counts[step]) == len(HOSTS) and reads.most(step) <= 2, \
                (step, dict(reads.counts[step]), {k: v for k, v in reads.callers.items() if k[0] == step})
        assert result.headline == (f"VERSION ROLLOUT DONE: v2 of {MODEL} serves on 3 server(s), v1 retired, "
                                   "no gap")
        assert failures == [] and answered > 0, failures[:3]
        for name in HOSTS:
            with fresh.client(name) as client:
                states = {e.version: e.state.value for e in client.repository_index() if e.name == MODEL}
            assert states.get("2") == "READY" and states.get("1") != "READY", (name, states)
        for repo in (fresh.shared, fresh.own):
            assert "version_policy" in (text := (repo / MODEL / "config.pbtxt").read_text()) and "2" in text
        assert len(audit.query(action="fleet apply", home=fresh.home)) >= 2  # one entry per step
    finally:
        for repo in (fresh.shared, fresh.own):
            shutil.rmtree(repo / MODEL / "2")


def test_the_fleet_page_rolls_out_a_new_version(fresh: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, fresh.home)
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(fresh.servers_file))
    for repo in (fresh.shared, fresh.own):
        shutil.copytree(repo / MODEL / "1", repo / MODEL / "2")
    try:
        at = AppTest.from_file(APP, default_timeout=120)
        at.switch_page("fleet.py")
        run(at)
        next(s for s in at.selectbox if s.label == "Fleet").set_value("lab")
        run(at)
        next(s for s in at.selectbox if s.label == "Change").set_value("new version")
        next(s for s in at.selectbox if s.label == "Model").set_value(MODEL)
        next(n for n in at.number_input if n.label == "Version (new version)").set_value(2)
        next(n for n in at.number_input if n.label == "Latency slack (ms)").set_value(10_000)
        button(at, "Start rollout…").click()  # shows what it would do and asks
        run(at)
        button(at, "Confirm rollout").click()
        run(at)
        assert wait_for(lambda: (r := runs.latest("lab")) is not None and not r.running, 180)
        run(at)
        assert any(s.value.startswith(f"VERSION ROLLOUT DONE: v2 of {MODEL} serves on 3 server(s)")
                   for s in at.success), [e.value for e in at.error]
        with fresh.client("c") as client:
            states = {e.version: e.state.value for e in client.repository_index() if e.name == MODEL}
        assert states.get("2") == "READY" and states.get("1") != "READY", states
    finally:
        for repo in (fresh.shared, fresh.own):
            shutil.rmtree(repo / MODEL / "2")


def test_a_version_missing_from_a_repository_is_refused_before_anything_changes(fresh: Lab) -> None:
    (fresh.shared / MODEL / "3").mkdir()
    try:
        with pytest.raises(RolloutRefusedError, match=f"version 3 of {MODEL} is not in {fresh.own}"):
            roll_version(fresh.members(), MODEL, 3, auth=guard.os_user(), home=fresh.home)
    finally:
        (fresh.shared / MODEL / "3").rmdir()
    assert (fresh.shared / MODEL / "config.pbtxt").read_text() == BASE
