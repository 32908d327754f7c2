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

An answer is a member's to choose, a read-only discovered one's too: a config over MAX_CONFIG_BYTES
(a real one is 1-2 kB) or with more than MAX_ENTRIES repeated entries is not compared, refused
before `normalized` fills every entry with every default (0.9 MB of `{"instance_group":[{},...]}`
grew to 390 MB that way); configs are grouped by a digest of their normalized form, and every
value said is outside text (geadmin.outside.plain): one line, at most VALUE_CHARS characters.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from tritonclient.grpc import model_config_pb2

from geadmin import outside
from geadmin.errors import ForbiddenError, TritonError
from geadmin.fleet.members import Member
from geadmin.triton.client import TritonClient

NEEDS_KEY = "its config API needs the admin key"
MAX_FIELDS = 4  # fields said per differing server group; the rest counted
MAX_NAMES = 5  # servers named per group; the rest counted
MAX_CONFIG_BYTES = 1 << 20  # a real served config is 1-2 kB
MAX_ENTRIES = 4096  # repeated entries (instance groups, inputs, map entries...) in one config
VALUE_CHARS = 80  # a value, a name or a field path, as said
CAUSE_CHARS = 200  # Triton's first line of why a config could not be read
TOO_LARGE = f"its config answer is over {MAX_CONFIG_BYTES >> 20} MiB"


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
        config = client.model_config(model)
    except ForbiddenError:
        return ServedConfig(not_compared=needs_key(member))
    except TritonError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return ServedConfig(not_compared=said(first, CAUSE_CHARS))
    if config.ByteSize() > MAX_CONFIG_BYTES:
        return ServedConfig(not_compared=TOO_LARGE)
    entries = _entries(config)
    if entries > MAX_ENTRIES:
        return ServedConfig(not_compared=f"its config has {entries} repeated entries, over the "
                            f"{MAX_ENTRIES} geadmin compares (a real config has a few dozen)")
    return ServedConfig(normalized(config))


def _entries(message: Message) -> int:
    """Repeated and map entries in `message`, nested ones included (what `normalized` fills)."""
    total = 0
    for field, value in message.ListFields():
        if field.label != FieldDescriptor.LABEL_REPEATED:
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                total += _entries(value)
            continue
        total += len(value)
        if total > MAX_ENTRIES:
            return total
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                items = value.values() if field.message_type.fields_by_name["value"].message_type else ()
            else:
                items = value
            for item in items:
                total += _entries(item)
                if total > MAX_ENTRIES:
                    return total
    return total


def said(value: object, limit: int = VALUE_CHARS) -> str:
    """Outside text as said on one line: control characters dropped, newlines folded, cut."""
    return " ".join(outside.plain(value, limit).splitlines())


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
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        groups.setdefault(digest, []).append(name)
    if len(groups) < 2:
        return None
    common, *others = sorted(groups.values(), key=len, reverse=True)  # stable: ties keep fleet order
    reference = served[common[0]]
    where = ", ".join(said(n) for n in common) if len(common) <= 3 else f"{len(common)} servers"
    parts = []
    for names in others:
        found = differences(served[names[0]], reference)
        told = [f"{_path(path)} {_shown(mine)} ({_shown(theirs)} on {where})"
                for path, mine, theirs in found[:MAX_FIELDS]]
        if len(found) > MAX_FIELDS:
            told.append(f"{len(found) - MAX_FIELDS} more field(s)")
        parts.append(f"{_names(names)}: {'; '.join(told)}")
    odd = tuple(n for names in others for n in names)
    line = f"{said(model)}: config differs on {len(odd)} of {len(served)} — " + " | ".join(parts)
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
    return said(path.removesuffix(".string_value") if path.startswith("parameters.") else path)


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "not set"
    if isinstance(value, dict):  # a parameter (ModelParameter holds only string_value) or a message
        return _shown(value["string_value"]) if set(value) == {"string_value"} else "set"
    if isinstance(value, list):
        if any(isinstance(v, dict) for v in value):
            return f"{len(value)} entries"
        return said("[" + ", ".join(_shown(v) for v in value[:VALUE_CHARS]) + "]")
    if isinstance(value, bool):
        return "true" if value else "false"
    return said(value) if value != "" else '""'


def _names(names: list[str]) -> str:
    """At most MAX_NAMES names, each said as outside text; the rest counted."""
    shown = ", ".join(said(n) for n in names[:MAX_NAMES])
    return shown + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")


@dataclass(frozen=True)
class Compared:
    """What a fleet's second round compared: per server the configs read (`served`, in the fleet's
    order), per model READY on two servers or more the servers serving it (`ready`), the skews.
    A model is compared only with two configs read or more; fewer is "not compared", never "same"."""

    served: Mapping[str, Mapping[str, ServedConfig]]
    ready: Mapping[str, tuple[str, ...]]
    skews: Mapping[str, ConfigSkew]

    @classmethod
    def of(cls, served: Mapping[str, Mapping[str, ServedConfig]],
           ready: Mapping[str, tuple[str, ...]]) -> Compared:
        skews = {}
        for model in sorted({*ready, *(m for configs in served.values() for m in configs)}):
            found = compare(model, {name: c.fields for name, configs in served.items()
                                    if (c := configs.get(model)) is not None and c.fields is not None})
            if found is not None:
                skews[model] = found
        return cls(served, {m: names for m, names in ready.items() if len(names) > 1}, skews)

    def read(self, model: str) -> list[str]:
        """The servers whose config of `model` was read."""
        return [name for name, configs in self.served.items()
                if (c := configs.get(model)) is not None and c.fields is not None]

    def counted(self) -> dict[str, int]:
        compared = sum(len(self.read(model)) >= 2 for model in self.ready)
        return {"compared": compared, "not_compared": len(self.ready) - compared}

    def not_compared(self) -> list[str]:
        """One line per server (and cause) whose config could not be read, then one per model with
        fewer than two configs read that no such line names."""
        lines, named = [], set()
        for name, configs in self.served.items():
            causes: dict[str, list[str]] = {}
            for model, served in configs.items():
                if served.fields is None:
                    causes.setdefault(served.not_compared, []).append(model)
                    named.add(model)
            for cause, models in causes.items():
                which = "" if len(models) == len(configs) else f" ({_names(sorted(models))})"
                lines.append(f"config not compared on {said(name)}{which}: {cause}")
        for model, names in self.ready.items():
            read = self.read(model)
            if len(read) < 2 and model not in named:
                lines.append(f"{said(model)}: config not compared, read on {len(read)} of the {len(names)} "
                             "servers serving it" + (f" ({_names(read)})" if read else ""))
        return lines

    def said_compared(self) -> bool | str:
        """`configs_compared` in --json: true when every config asked for was compared, "partial"
        when some were, false when none was."""
        counted = self.counted()
        if not counted["not_compared"] and not self.not_compared():
            return True
        return "partial" if counted["compared"] else False

    def word(self, server: str, model: str) -> str | None:
        """`model` on `server`: "same", "differs", "not read" (its config), "not compared" (read,
        but fewer than two were); None where it was not asked for."""
        served = self.served.get(server, {}).get(model)
        if model not in self.ready or (served is None and server not in self.ready[model]):
            return None
        if served is None or served.fields is None:
            return "not read"
        if len(self.read(model)) < 2:
            return "not compared"
        skew = self.skews.get(model)
        return "differs" if skew and server in skew.odd else "same"
