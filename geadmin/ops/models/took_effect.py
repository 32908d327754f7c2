"""Did Triton load the file an apply wrote? The fields the change sets, looked up in the live config.

A reload that Triton answers with success says nothing about *which* file it read: with
`--repository` naming a copy of the repository (not the one this Triton serves), geadmin writes
there, Triton reloads its own unchanged file, and the reload succeeds. What tells is the live
config (`GET /v2/models/M/config`): when every field the change sets still holds its previous
value there, and none holds its new one, Triton did not load the file geadmin wrote.

Triton normalizes every config it loads (defaults filled in, `KIND_AUTO` resolved to a kind), so
this judges only with evidence both ways, and otherwise says nothing:

- a field the change removes is no evidence (Triton may fill the removed value back in as its
  default), nor a value Triton resolves to another (`KIND_AUTO`), nor the version policy: a
  change of it alone loads and unloads versions, and a version that stays is not reloaded, so
  the live config (that version's) keeps the previous policy (seen in the version rollouts of
  tests/integration/test_fleet_journal.py: `versions: [1, 2]` -> `[2]` live as `[1, 2]`);
- a changed field counts as "still old" only when the live config holds every value the previous
  file set there (a field the previous file lacked: when the live config lacks it too) and
  does not hold the new one; extra fields Triton added do not count against either.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tritonclient.grpc import model_config_pb2

from geadmin.errors import ConfigParseError
from geadmin.repository.knobs import differing_fields
from geadmin.repository.modelconfig import parse_pbtxt, to_dict

# Values Triton replaces with what it resolves them to: the live config never holds them.
RESOLVED_BY_TRITON = frozenset({"KIND_AUTO"})
# Top-level fields whose change does not reload the versions that keep serving: the live config
# may hold their previous value after a load that took.
NOT_RELOADED_FOR = frozenset({"version_policy"})

FieldPath = tuple[str | int, ...]  # keys and list indexes, from the config's top


@dataclass(frozen=True)
class Uptake:
    """The fields a change sets (as dotted paths), and those the live config still holds as before."""

    changed: tuple[str, ...]
    still_old: tuple[str, ...]

    @property
    def none_took(self) -> bool:
        """Every field the change sets is at its old value in the live config: Triton did not load it."""
        return bool(self.changed) and len(self.still_old) == len(self.changed)


def uptake(previous: bytes, new: bytes, live: model_config_pb2.ModelConfig) -> Uptake:
    """Which fields `new` sets differently from `previous`, and which of them `live` still holds
    at the previous value. A file that does not parse changes nothing that can be judged."""
    try:
        old_fields = to_dict(parse_pbtxt(previous.decode("utf-8")))
        new_fields = to_dict(parse_pbtxt(new.decode("utf-8")))
    except (ConfigParseError, UnicodeDecodeError):
        return Uptake((), ())
    live_fields = to_dict(live)
    changed, still_old = [], []
    for path, old, wanted in _set_by_change(old_fields, new_fields, ()):
        resolved = isinstance(wanted, str) and wanted in RESOLVED_BY_TRITON
        if resolved or (path and path[0] in NOT_RELOADED_FOR):
            continue
        changed.append(_dotted(path))
        there = _at(live_fields, path)
        if _holds(there, old) and not _holds(there, wanted):
            still_old.append(_dotted(path))
    return Uptake(tuple(changed), tuple(still_old))


def _set_by_change(old: Any, new: Any, path: FieldPath) -> Iterator[tuple[FieldPath, Any, Any]]:
    """(path, old value, new value) of every field `new` sets to another value than `old`:
    the leaves where both hold a value, or the whole subtree the previous file lacked. Fields
    only `old` sets (removed by the change) are left out."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key, value in new.items():
            yield from _set_by_change(old.get(key), value, (*path, key))
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for index, (before, after) in enumerate(zip(old, new, strict=True)):
            yield from _set_by_change(before, after, (*path, index))
    elif old != new:
        yield path, old, new


def _at(tree: Any, path: FieldPath) -> Any:
    """The value at `path` in `tree`, None when it has none."""
    for step in path:
        if isinstance(step, int):
            tree = tree[step] if isinstance(tree, list) and step < len(tree) else None
        else:
            tree = tree.get(step) if isinstance(tree, dict) else None
    return tree


def _holds(live: Any, value: Any) -> bool:
    """Does the live value carry `value` (every field it sets, same value; None: absent)?"""
    if value is None:
        return live is None
    return not differing_fields(value, live)


def _dotted(path: FieldPath) -> str:
    return "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path).lstrip(".")
