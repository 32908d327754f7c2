"""Config skew, the pure parts: the served configs compared field by field, said per model with
the servers off the most common config; a config that could not be read is "not compared",
never the same; the headline, the matrix cell and the exit code (geadmin.fleet.config_skew,
geadmin.fleet.status, the second round of geadmin.fleet.polling). Two real tritonservers
serving different configs: tests/integration/test_fleet_config_skew.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.fleet import exit_code, render
from geadmin.diagnose.health import ServerSnapshot
from geadmin.domain import ModelEntry, ModelState
from geadmin.errors import ForbiddenError, ModelNotFoundError, TritonError
from geadmin.fleet import polling
from geadmin.fleet.config_skew import NEEDS_KEY, ServedConfig, compare, normalized, read_served
from geadmin.fleet.discovery import Discovery, Fleet
from geadmin.fleet.members import Member, Trust
from geadmin.fleet.status import FleetStatus, ServerView
from geadmin.triton.servers import ServerSpec

TRUSTED = Trust(True, "the servers file names it")


def config(batch: int = 8, count: int = 1, **params: str) -> mc.ModelConfig:
    found = mc.ModelConfig(name="echo", backend="python", max_batch_size=batch,
                           instance_group=[mc.ModelInstanceGroup(name="echo_0", count=count,
                                                                 kind=mc.ModelInstanceGroup.KIND_CPU)])
    for key, value in params.items():
        found.parameters[key].string_value = value
    return found


def served(**configs: mc.ModelConfig) -> dict[str, dict[str, Any]]:
    return {name: normalized(c) for name, c in configs.items()}


def test_the_same_config_everywhere_is_no_skew() -> None:
    assert compare("echo", served(a=config(), b=config(), c=config())) is None


def test_one_server_off_names_it_and_the_fields_with_both_values() -> None:
    found = compare("echo", served(a=config(), b=config(batch=4, count=2), c=config()))
    assert found is not None and found.odd == ("b",)
    assert found.line == ("echo: config differs on 1 of 3 — b: max_batch_size 4 (8 on a, c); "
                          "instance_group[0].count 2 (1 on a, c)")


def test_a_tie_is_said_against_the_first_server() -> None:
    found = compare("echo", served(a=config(), b=config(batch=4)))
    assert found is not None and found.odd == ("b",)
    assert found.line == "echo: config differs on 1 of 2 — b: max_batch_size 4 (8 on a)"


def test_many_servers_are_counted_and_each_other_config_is_its_own_group() -> None:
    many = {f"t{i}": config() for i in range(8)}
    found = compare("echo", served(**many, x=config(batch=4), y=config(mode="v2"), z=config(mode="v2")))
    assert found is not None and found.odd == ("y", "z", "x")
    assert found.line == ("echo: config differs on 3 of 11 — y, z: parameters.mode v2 (not set on 8 servers)"
                          " | x: max_batch_size 4 (8 on 8 servers)")


def test_only_a_few_fields_are_said_the_rest_counted() -> None:
    other = config(batch=4, count=3, a="1", b="2", c="3")
    found = compare("echo", served(a=config(), b=other))
    assert found is not None
    assert found.line.endswith("; 1 more field(s)") and found.line.count(" (") == 4


def test_a_field_triton_fills_with_its_default_is_compared_as_that_default() -> None:
    """max_batch_size 0 is what protobuf leaves out; the normalized form keeps it."""
    assert normalized(config(batch=0))["max_batch_size"] == 0
    found = compare("echo", served(a=config(batch=0), b=config(batch=8)))
    assert found is not None and "max_batch_size 8 (0 on a)" in found.line


def test_lists_of_values_read_as_one_value_and_a_missing_message_as_not_set() -> None:
    batching = config()
    batching.dynamic_batching.preferred_batch_size.extend([4, 8])
    found = compare("echo", served(a=config(), b=batching))
    assert found is not None and "b: dynamic_batching set (not set on a)" in found.line
    other = config()
    other.dynamic_batching.preferred_batch_size.extend([8])
    found = compare("echo", served(a=batching, b=other))
    assert found is not None and "dynamic_batching.preferred_batch_size [8] ([4, 8] on a)" in found.line
    two = config()
    two.instance_group.add(count=1)
    found = compare("echo", served(a=config(), b=two))
    assert found is not None and "instance_group 2 entries (1 entries on a)" in found.line


class Client:
    """A TritonClient double for the config API: answers a config, or raises `fails`."""

    def __init__(self, fails: TritonError | None = None) -> None:
        self.fails = fails

    def model_config(self, name: str, version: str = "") -> mc.ModelConfig:
        if self.fails is not None:
            raise self.fails
        return config()


def member(name: str, trust: Trust = TRUSTED, key: str | None = None) -> Member:
    return Member(ServerSpec(name, f"http://{name}:8000", admin_key=key), "servers", trust=trust)


@pytest.mark.parametrize(("who", "fix"), [
    (member("r", Trust(False, "no proof")), "a read-only member gets no key: prove it belongs"),
    (member("r"), "give geadmin its key (admin_key_file in the servers file)"),
    (member("r", key="k"), "refused the one geadmin has for it"),
])
def test_a_restricted_config_api_is_not_compared_and_says_how_to_get_the_key(who: Member, fix: str) -> None:
    client: Any = Client(ForbiddenError("This API is restricted"))
    found = read_served(client, who, "echo")
    assert found.fields is None and found.not_compared.startswith(NEEDS_KEY) and fix in found.not_compared


def test_any_other_failure_is_not_compared_with_triton_s_first_line() -> None:
    client: Any = Client(ModelNotFoundError("unknown model: 'echo'\nmore"))
    found = read_served(client, member("a"), "echo")
    assert (found.fields, found.not_compared) == (None, "unknown model: 'echo'")


def view(name: str, configs: dict[str, ServedConfig] | None = None, *, trust: Trust = TRUSTED) -> ServerView:
    snap = ServerSnapshot(name, f"http://{name}:8000", "http", datetime.now(timezone.utc), live=True,
                          ready=True, models=(ModelEntry("echo", "1", ModelState.READY, ""),))
    return ServerView(member(name, trust), snap, configs=configs or {})


def fleet(*views: ServerView, compared: bool = True) -> FleetStatus:
    return FleetStatus(Discovery(Fleet("f", ("servers",)), tuple(v.member for v in views), ()), views, 0.1,
                       configs_compared=compared)


def same(c: mc.ModelConfig) -> dict[str, ServedConfig]:
    return {"echo": ServedConfig(normalized(c))}


def test_config_skew_is_degraded_like_version_skew_and_marks_the_cell() -> None:
    status = fleet(view("a", same(config())), view("b", same(config(batch=4, count=2))))
    assert status.config_skew() == ["echo: config differs on 1 of 2 — b: max_batch_size 4 (8 on a); "
                                    "instance_group[0].count 2 (1 on a)"]
    assert status.skew() == []  # state and version agree: only the config tells
    assert status.headline() == ("FLEET DEGRADED: 2 of 2 servers serving; 0 model(s) failed, 1 skewed — "
                                 f"first: {status.config_skew()[0]}")
    assert exit_code(status) == ExitCode.DEGRADED
    assert [status.cell_text(v, "echo") for v in status.servers] == ["READY v1", "READY v1, config differs"]
    document = status.to_json()
    assert document["matrix"]["echo"]["b"] == {"state": "READY", "version": "1", "config": "differs"}
    assert document["config_skew"] == status.config_skew() and document["configs_compared"] is True
    text = render(status)
    assert "CONFIG SKEW (1):\n  echo: config differs on 1 of 2" in text


def test_the_same_config_everywhere_is_ok_and_says_so() -> None:
    status = fleet(view("a", same(config())), view("b", same(config())))
    assert status.headline() == "FLEET OK: 2 servers, 1 model, the same everywhere"
    assert exit_code(status) == ExitCode.OK
    assert status.to_json()["matrix"]["echo"]["a"]["config"] == "same"


def test_a_config_not_read_is_never_the_same() -> None:
    why = f"{NEEDS_KEY} — give geadmin its key (admin_key_file in the servers file)"
    locked = ServedConfig(not_compared=why)
    status = fleet(view("a", same(config())), view("r", {"echo": locked}))
    assert status.config_skew() == []
    assert status.configs_not_compared() == [f"config not compared on r: {locked.not_compared}"]
    assert status.headline() == f"FLEET OK, with warnings: config not compared on r: {locked.not_compared}"
    assert "the same" not in status.headline() and exit_code(status) == ExitCode.OK
    assert status.cell_text(status.servers[1], "echo") == "READY v1, config not read"
    assert status.to_json()["configs_not_compared"] == status.configs_not_compared()


def test_without_configs_compared_ok_claims_only_state_and_version() -> None:
    status = fleet(view("a"), view("b"), compared=False)
    assert status.headline() == ("FLEET OK: 2 servers, 1 model, the same state and version everywhere "
                                 "(configs not compared)")
    assert "configs: not compared (`--configs`" in render(status).splitlines()[1]
    assert "config" not in status.to_json()["matrix"]["echo"]["a"]


def test_a_model_skewed_by_version_and_config_counts_once() -> None:
    b = view("b", same(config(batch=4)))
    assert b.snapshot is not None
    b = ServerView(b.member, ServerSnapshot(**{**b.snapshot.__dict__, "models": (
        ModelEntry("echo", "2", ModelState.READY, ""),)}), configs=b.configs)
    status = fleet(view("a", same(config())), b)
    assert len(status.skew()) == 1 and len(status.config_skew()) == 1
    assert ", 1 skewed — first: " in status.headline()


# -- the second round of the poll ------------------------------------------------------------
def test_the_poll_reads_only_models_ready_on_two_servers_and_a_slow_one_is_not_read_not_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    released = threading.Event()
    asked: list[tuple[str, str]] = []

    class Fake:
        def __init__(self, name: str) -> None:
            self.name = name

        def model_config(self, model: str, version: str = "") -> mc.ModelConfig:
            asked.append((self.name, model))
            if self.name == "slow":
                released.wait(30)
            return config(batch=4 if self.name == "b" else 8)

    @contextmanager
    def fake_client(m: Member, timeout_s: float) -> Iterator[Fake]:
        yield Fake(m.name)

    monkeypatch.setattr(polling, "_client", fake_client)
    only_a = ModelEntry("solo", "1", ModelState.READY, "")
    a = view("a")
    assert a.snapshot is not None
    models = (*a.snapshot.models, only_a)
    a = ServerView(a.member, ServerSnapshot(**{**a.snapshot.__dict__, "models": models}))
    try:
        views = polling._with_configs([a, view("b"), view("slow")], timeout_s=0.2)
    finally:
        released.set()
    assert sorted(asked) == [("a", "echo"), ("b", "echo"), ("slow", "echo")]  # "solo" is on a alone
    status = fleet(*views)
    assert status.down() == []
    assert status.configs_not_compared() == ["config not compared on slow: no answer within 0.2 s"]
    assert status.config_skew() == ["echo: config differs on 1 of 2 — b: max_batch_size 4 (8 on a)"]


# -- review of ef66852: bounds, deadlines, "same" with nothing compared, outside text ---------
class Answers:
    """A TritonClient double whose config API answers `answer` (anything a member may send)."""

    def __init__(self, answer: mc.ModelConfig) -> None:
        self.answer = answer

    def model_config(self, name: str, version: str = "") -> mc.ModelConfig:
        return self.answer


def test_a_config_answer_over_1_mib_is_not_compared_and_says_so() -> None:
    huge: Any = Answers(config(blob="x" * (1 << 20)))
    found = read_served(huge, member("x"), "echo")
    assert (found.fields, found.not_compared) == (None, "its config answer is over 1 MiB")
    status = fleet(view("a", same(config())), view("x", {"echo": found}))
    assert status.configs_not_compared() == ["config not compared on x: its config answer is over 1 MiB"]


def test_many_repeated_entries_are_refused_before_they_are_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    """{"instance_group":[{},{},...]} of 0.9 MB: each empty entry would be filled with every
    default (hundreds of MB); it is refused before normalized() sees it."""
    flood = mc.ModelConfig(name="echo")
    flood.instance_group.extend(mc.ModelInstanceGroup() for _ in range(300_000))
    assert flood.ByteSize() < 1 << 20  # under the answer cap: the count is what bounds it

    def never(config: mc.ModelConfig) -> dict[str, Any]:
        raise AssertionError("normalized a flood")

    monkeypatch.setattr("geadmin.fleet.config_skew.normalized", never)
    found = read_served(Answers(flood), member("x"), "echo")  # type: ignore[arg-type]
    assert found.fields is None
    assert found.not_compared.startswith("its config has 300000 repeated entries"), found.not_compared


def test_a_model_with_one_readable_config_is_not_compared_never_the_same() -> None:
    locked = ServedConfig(not_compared="boom")
    status = fleet(view("a", same(config())), view("b", {"echo": locked}))
    document = status.to_json()
    assert document["matrix"]["echo"]["a"]["config"] == "not compared"
    assert document["matrix"]["echo"]["b"]["config"] == "not read"
    assert document["configs_compared"] is False
    assert document["config_models"] == {"compared": 0, "not_compared": 1}
    assert status.cell_text(status.servers[0], "echo") == "READY v1, config not compared"
    assert status.headline().startswith("FLEET OK, with warnings: ")


def test_no_config_readable_anywhere_is_not_compared_and_not_plain_ok() -> None:
    locked = {"echo": ServedConfig(not_compared="boom")}
    status = fleet(view("a", locked), view("b", locked))
    document = status.to_json()
    assert document["configs_compared"] is False and document["config_skew"] == []
    assert not status.headline().startswith("FLEET OK:")
    assert [document["matrix"]["echo"][n]["config"] for n in ("a", "b")] == ["not read", "not read"]


def test_some_models_compared_and_some_not_is_partial() -> None:
    two = ModelEntry("solo", "1", ModelState.READY, "")
    views = []
    for name, solo in (("a", ServedConfig(normalized(config()))), ("b", ServedConfig(not_compared="boom"))):
        v = view(name)
        assert v.snapshot is not None
        snap = ServerSnapshot(**{**v.snapshot.__dict__, "models": (*v.snapshot.models, two)})
        views.append(ServerView(v.member, snap, configs={**same(config()), "solo": solo}))
    document = fleet(*views).to_json()
    assert document["configs_compared"] == "partial"
    assert document["config_models"] == {"compared": 1, "not_compared": 1}
    assert document["matrix"]["echo"]["a"]["config"] == "same"


def test_a_model_not_compared_is_said_even_when_every_server_says_why() -> None:
    """A model READY on several servers whose configs were asked for and could not be compared:
    never plain OK, whatever each server's line says."""
    status = fleet(view("a", same(config())), view("b", {}))  # b: its config missing altogether
    assert not status.headline().startswith("FLEET OK:"), status.headline()
    assert any("echo" in line for line in status.configs_not_compared())


HOSTILE = "\n\n# FLEET OK\n*all* fine " + "y" * 500


def test_a_value_from_a_server_is_one_bounded_line_in_the_cli() -> None:
    status = fleet(view("a", same(config())), view("b", same(config(mode=HOSTILE))))
    (line,) = status.config_skew()
    assert "\n" not in line and "# FLEET OK" in line and len(line) < 250, line
    text = render(status)
    assert not any(row.startswith("# FLEET OK") for row in text.splitlines())
    assert "\n" not in status.headline()
    client: Any = Client(ModelNotFoundError(f"unknown model{'z' * 5000}"))
    why = read_served(client, member("a"), "echo")
    assert len(why.not_compared) <= 200


def test_the_second_round_stops_reading_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow member's worker reads no model after the deadline: the CLI does not wait for it at
    exit, the page does not pile threads up."""
    released, finished = threading.Event(), threading.Event()
    asked: list[str] = []

    class Slow:
        def model_config(self, model: str, version: str = "") -> mc.ModelConfig:
            asked.append(model)
            released.wait(30)
            return config()

    @contextmanager
    def fake_client(m: Member, timeout_s: float) -> Iterator[Any]:
        try:
            yield Slow() if m.name == "slow" else Client()
        finally:
            if m.name == "slow":
                finished.set()

    monkeypatch.setattr(polling, "_client", fake_client)
    names = [f"m{i}" for i in range(5)]

    def with_models(name: str) -> ServerView:
        v = view(name)
        assert v.snapshot is not None
        models = tuple(ModelEntry(n, "1", ModelState.READY, "") for n in names)
        return ServerView(v.member, ServerSnapshot(**{**v.snapshot.__dict__, "models": models}))

    try:
        views = polling._with_configs([with_models("a"), with_models("slow")], timeout_s=0.2)
    finally:
        released.set()
    assert finished.wait(30)
    assert asked == ["m0"], asked
    assert all(c.fields is None for c in views[1].configs.values())


def test_a_fleet_larger_than_the_client_cache_keeps_one_client_per_member_for_both_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Round 2 borrows round 1's clients: with more members than MAX_CLIENTS, none was closed
    (and none is made twice)."""
    made: list[str] = []

    class Counted:
        def __init__(self, url: str) -> None:
            made.append(url)

        def close(self) -> None:
            made.append(f"closed {self}")

    monkeypatch.setattr(polling, "client_for", lambda m, timeout_s: Counted(m.url))
    monkeypatch.setattr(polling, "_clients", polling.ClientCache(polling._make, capacity=polling.MAX_CLIENTS))
    monkeypatch.setattr(polling, "take_snapshot", lambda name, client: ServerSnapshot(
        name, "http://x", "http", datetime.now(timezone.utc), live=False, ready=False, error="down"))
    members = tuple(member(f"t{i}") for i in range(polling.MAX_CLIENTS + 6))
    polling.poll(Discovery(Fleet("f", ("servers",)), members, ()), timeout_s=5.0)
    assert len(made) == len(members) and len(polling._clients) == len(members)
    polling.poll(Discovery(Fleet("f", ("servers",)), members, ()), timeout_s=5.0)
    assert len(made) == len(members)
