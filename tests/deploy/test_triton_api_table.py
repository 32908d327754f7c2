"""docs/security.md's table of Triton's API groups against the flags every stack geadmin starts
passes to Triton: the embedded stack (TritonProcess.command()), both compose files, and the
Kubernetes base with every overlay (rendered as kubectl would). A group the docs call "keyed"
must be restricted on HTTP and gRPC in that stack, an "open" one on neither: the docs and the
code cannot drift apart. Nothing here starts a server; the integration test that the restricted
groups really refuse a request without the key is tests/integration/test_triton_key.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from geadmin.domain import Ports
from geadmin.stack.tritonserver import TritonProcess
from tests.support.deploy import ROOT
from tests.support.kube_render import render

SECURITY = ROOT / "docs" / "security.md"
SECTION = "## Triton's API groups: open or keyed"
# Triton 2.51's API groups (FACTS.md "Trust, faults and devices"; `tritonserver --help`).
GROUPS = ("health", "metadata", "inference", "shared-memory", "model-config", "model-repository",
          "statistics", "trace", "logging")
FLAGS = ("--http-restricted-api", "--grpc-restricted-protocol")
KEY = "table-test-key"
COMPOSE_FILES = ("compose.yaml", "compose.cpu.yaml")
KUSTOMIZATIONS = ("base", "overlays/ascend910", "overlays/ascend310p", "overlays/volcano")
# The table's stack columns, by the first word of their heading.
STACKS = ("embedded", "compose", "Kubernetes")


def docs_table(text: str) -> dict[str, dict[str, str]]:
    """{group: {stack column: "open" | "keyed"}} from the section's table."""
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    table = {}
    for line in rows[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        group = cells[0].strip("`")
        table[group] = {name: cells[header.index(name)] for name in STACKS}
    return table


def restricted(arguments: list[str], where: str) -> set[str]:
    """The groups Triton restricts with these arguments: the same on both protocols, or an error."""
    found: dict[str, set[str]] = {}
    for argument in arguments:
        name, _, value = argument.partition("=")
        if name in FLAGS:
            assert name not in found, f"{where}: {name} given twice"
            found[name] = set(value.partition(":")[0].split(","))  # <groups>:<header>=<key>
    assert set(found) == set(FLAGS), f"{where}: Triton runs without {set(FLAGS) - set(found)}"
    http, grpc = (found[flag] for flag in FLAGS)
    assert http == grpc, f"{where}: HTTP restricts {sorted(http)}, gRPC {sorted(grpc)}"
    unknown = http - set(GROUPS)
    assert not unknown, f"{where}: {sorted(unknown)} is no Triton API group"
    return http


def embedded_arguments() -> list[str]:
    process = TritonProcess(Path("/models"), binary=Path("/bin/true"), backend_dir=Path("/backends"),
                            log_path=Path("/tmp/triton.log"), ports=Ports(8000, 8001, 8002), models=[],
                            admin_key=KEY)
    return process.command()


def compose_arguments(file: str) -> list[str]:
    compose = yaml.safe_load((ROOT / file).read_text(encoding="utf-8"))
    return [str(argument) for argument in compose["services"]["triton"]["command"]]


def kubernetes_arguments(kustomization: str) -> list[str]:
    objects = render(ROOT / "deploy" / "kubernetes" / kustomization)
    (triton,) = [o for o in objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "triton"]
    (container,) = triton["spec"]["template"]["spec"]["containers"]
    return [str(argument) for argument in container["args"]]


def stacks() -> dict[str, dict[str, list[str]]]:
    """Every stack geadmin starts, by the table's column: {where: Triton's arguments}."""
    return {
        "embedded": {"geadmin/stack/tritonserver.py": embedded_arguments()},
        "compose": {file: compose_arguments(file) for file in COMPOSE_FILES},
        "Kubernetes": {f"deploy/kubernetes/{k}": kubernetes_arguments(k) for k in KUSTOMIZATIONS},
    }


def drift(text: str, found: dict[str, dict[str, list[str]]]) -> list[str]:
    """Every difference between the docs' table and the flags of `found`."""
    table = docs_table(text)
    problems = []
    if sorted(table) != sorted(GROUPS):
        problems.append(f"the table lists {sorted(table)}, Triton's groups are {sorted(GROUPS)}")
    for column, places in found.items():
        for where, arguments in places.items():
            keyed = restricted(arguments, where)
            for group in GROUPS:
                said = table.get(group, {}).get(column)
                really = "keyed" if group in keyed else "open"
                if said != really:
                    problems.append(f"{group}: docs/security.md says {said!r} for {column}, "
                                    f"{where} makes it {really}")
    return problems


def test_the_docs_table_says_what_every_stack_restricts() -> None:
    assert drift(SECURITY.read_text(encoding="utf-8"), stacks()) == []


def test_every_stack_keys_shared_memory_and_what_changes_the_server() -> None:
    """The issue this table closed: shared memory was open on a public bind."""
    for column, places in stacks().items():
        for where, arguments in places.items():
            assert {"shared-memory", "model-repository", "model-config", "logging", "trace"} <= \
                restricted(arguments, where), (column, where)


def test_the_key_header_is_the_one_geadmin_sends() -> None:
    for places in stacks().values():
        for where, arguments in places.items():
            for argument in arguments:
                if argument.startswith(FLAGS):
                    header = argument.partition(":")[2]
                    assert header.startswith("admin-key=") and header != "admin-key=", (where, argument)


# -- planted drift: the comparison must fail ------------------------------------------------
@pytest.mark.parametrize(("old", "new", "expected"), [
    ("| `shared-memory` | `/v2/systemsharedmemory/…`, `/v2/cudasharedmemory/…`: register a region by name, "
     "and through a model's output read it back | keyed",
     "| `shared-memory` | `/v2/systemsharedmemory/…`, `/v2/cudasharedmemory/…`: register a region by name, "
     "and through a model's output read it back | open",
     "shared-memory: docs/security.md says 'open' for embedded, "
     "geadmin/stack/tritonserver.py makes it keyed"),
    ("| `statistics` |", "| `stats` |", "the table lists"),
])
def test_planted_docs_drift_is_found(old: str, new: str, expected: str) -> None:
    text = SECURITY.read_text(encoding="utf-8")
    assert old in text, "the planted change no longer applies: update the test"
    found = drift(text.replace(old, new, 1), stacks())
    assert any(expected in line for line in found), found


def test_planted_flag_drift_is_found() -> None:
    """A stack that stops restricting a group (compose.cpu.yaml without shared-memory), or that
    restricts it on one protocol only, is caught."""
    text = SECURITY.read_text(encoding="utf-8")
    found = stacks()
    found["compose"]["compose.cpu.yaml"] = [a.replace("shared-memory,", "")
                                            for a in found["compose"]["compose.cpu.yaml"]]
    assert "shared-memory: docs/security.md says 'keyed' for compose, compose.cpu.yaml makes it open" \
        in drift(text, found)
    one_sided = [a.replace("shared-memory,", "") if a.startswith("--grpc") else a
                 for a in embedded_arguments()]
    with pytest.raises(AssertionError, match=r"HTTP restricts .* gRPC"):
        restricted(one_sided, "embedded")
    with pytest.raises(AssertionError, match="runs without"):
        restricted([a for a in embedded_arguments() if not a.startswith("--grpc")], "embedded")
