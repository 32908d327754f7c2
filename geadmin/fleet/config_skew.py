"""Config skew: one model served with different configs by servers of one fleet, at the same
version (a hand edit and a reload on one node, a rollout that stopped half way) — the state and
version matrix reads "the same everywhere" while one replica batches 4 and the others 8.

What is compared is what each server serves: its answer to Triton's model config API
(`GET /v2/models/NAME/config`, gRPC `ModelConfig`, through TritonClient), the config Triton
normalized at load (every default filled), field by field as protobuf gives it. No field is
left out: checked on Triton 2.51 (the wheel's, CPU), two servers loading the same files from
different repository paths answer identical configs for every sample model (python models and
an ensemble), instance group names included, and an HTTP and a gRPC answer parse to the same
message. A field that differs is what the servers loaded.

A server whose config cannot be read is never counted as the same: `ServedConfig.not_compared`
says why ("its config API needs the admin key" for a restricted model-config API without it,
else Triton's answer), and geadmin.fleet.status says it beside the skew.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2

from geadmin.errors import ForbiddenError, TritonError
from geadmin.fleet.members import Member
from geadmin.triton.client import TritonClient

NEEDS_KEY = "its config API needs the admin key"
MAX_FIELDS = 4  # fields said per differing server group; the rest counted
MAX_NAMES = 5  # servers named per group; the rest counted


@dataclass(frozen=True)
class ServedConfig:
    """What one server answered for one model's config: its normalized fields, or why not."""

    fields: Mapping[str, Any] | None = None
    not_compared: str = ""  # set when `fields` is None


@dataclass(frozen=True)
class ConfigSkew:
    """One model served with more than one config: the servers off the most common one."""

    model: str
    odd: tuple[str, ...]  # servers serving another config than the most common one
    line: str  # "echo: config differs on 1 of 3 — b: max_batch_size 4 (8 on a, c); ..."


def normalized(config: model_config_pb2.ModelConfig) -> dict[str, Any]:
    """The compared form: every field, defaults included (an unset `max_batch_size` is 0)."""
    return json_format.MessageToDict(config, preserving_proto_field_name=True,
                                     including_default_value_fields=True)


def read_served(client: TritonClient, member: Member, model: str) -> ServedConfig:
    """`model`'s config as `member` serves it; never raises for Triton trouble."""
    try:
        return ServedConfig(normalized(client.model_config(model)))
    except ForbiddenError:
        return ServedConfig(not_compared=needs_key(member))
    except TritonError as exc:
        return ServedConfig(not_compared=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)


def needs_key(member: Member) -> str:
    """Why a restricted config API refused us, with what gives geadmin the key."""
    if not member.trust.trusted:
        return (f"{NEEDS_KEY} — a read-only member gets no key: prove it belongs (trusted_networks, "
                "workload or tls_ca_file in its [[fleet]])")
    if not member.spec.admin_key:
        return f"{NEEDS_KEY} — give geadmin its key (admin_key_file in the servers file)"
    return f"{NEEDS_KEY}, and refused the one geadmin has for it — check its admin_key_file"


def compare(model: str, served: Mapping[str, Mapping[str, Any]]) -> ConfigSkew | None:
    """`served`: server name -> normalized config, in the fleet's order. None when all agree.
    The most common config is the reference (a tie: the one of the first server)."""
    groups: dict[str, list[str]] = {}
    for name, fields in served.items():
        groups.setdefault(json.dumps(fields, sort_keys=True), []).append(name)
    if len(groups) < 2:
        return None
    common, *others = sorted(groups.values(), key=len, reverse=True)  # stable: ties keep fleet order
    reference = served[common[0]]
    where = ", ".join(common) if len(common) <= 3 else f"{len(common)} servers"
    parts = []
    for names in others:
        found = differences(served[names[0]], reference)
        said = [f"{_path(path)} {_shown(mine)} ({_shown(theirs)} on {where})"
                for path, mine, theirs in found[:MAX_FIELDS]]
        if len(found) > MAX_FIELDS:
            said.append(f"{len(found) - MAX_FIELDS} more field(s)")
        parts.append(f"{_names(names)}: {'; '.join(said)}")
    odd = tuple(n for names in others for n in names)
    line = f"{model}: config differs on {len(odd)} of {len(served)} — " + " | ".join(parts)
    return ConfigSkew(model, odd, line)


_MISSING = object()


def differences(mine: Any, theirs: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """(path, mine, theirs) of every field that differs, in the config's field order. Messages and
    lists of messages of one length are walked; a list of values is one value."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        keys = [*mine, *(k for k in theirs if k not in mine)]
        return [d for k in keys for d in differences(mine.get(k, _MISSING), theirs.get(k, _MISSING),
                                                    f"{path}.{k}" if path else k)]
    if (isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs)
            and any(isinstance(v, dict) for v in [*mine, *theirs])):
        return [d for i, (m, t) in enumerate(zip(mine, theirs, strict=True))
                for d in differences(m, t, f"{path}[{i}]")]
    return [] if mine == theirs else [(path or "(the whole config)", mine, theirs)]


def _path(path: str) -> str:
    """`parameters.mode.string_value` -> `parameters.mode` (a parameter holds only that)."""
    return path.removesuffix(".string_value") if path.startswith("parameters.") else path


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "not set"
    if isinstance(value, dict):  # a parameter (ModelParameter holds only string_value) or a message
        return _shown(value["string_value"]) if set(value) == {"string_value"} else "set"
    if isinstance(value, list):
        if any(isinstance(v, dict) for v in value):
            return f"{len(value)} entries"
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if value != "" else '""'


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES])
    return shown + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")
