"""The knobs operators turn during an incident, read from a config text and written back into it.

The text stays the one source of truth: `read_knobs` is a view of it, and `with_knobs`
edits the text through `geadmin.repository.rewrite`, so comments and layout survive (or the lost
comments are named). The editor page and any script share these two functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonclient.grpc import model_config_pb2

from geadmin.errors import RepositoryError
from geadmin.repository import npu_ge_params as npu_ge
from geadmin.repository.modelconfig import CONFIG_FILE, parse_pbtxt, to_dict
from geadmin.repository.rewrite import Rewrite, rewrite

DEVICE_IDS = "device_ids"


@dataclass(frozen=True)
class Knobs:
    max_batch_size: int
    dynamic_batching: bool
    max_queue_delay_us: int
    preferred_batch_sizes: tuple[int, ...]
    instance_count: int | None  # None: several instance groups, edit the text
    device_ids: str | None  # None: not an npu_ge model; "" : the parameter is not set
    versions: str | None = None  # version_policy as policy_text writes it; None: leave it as it is


def read_knobs(config: model_config_pb2.ModelConfig) -> Knobs:
    batching = config.dynamic_batching
    groups = config.instance_group
    device_ids = None
    if npu_ge.is_npu_ge(config):
        chosen = npu_ge.effective(npu_ge.string_parameters(config), DEVICE_IDS)
        device_ids = chosen[1] if chosen else ""
    return Knobs(
        max_batch_size=config.max_batch_size,
        dynamic_batching=config.HasField("dynamic_batching"),
        max_queue_delay_us=batching.max_queue_delay_microseconds,
        preferred_batch_sizes=tuple(batching.preferred_batch_size),
        instance_count=groups[0].count if len(groups) == 1 else (1 if not groups else None),
        device_ids=device_ids,
        versions=policy_text(config),
    )


def policy_text(config: model_config_pb2.ModelConfig) -> str:
    """The version policy in one line: "" (Triton's default: the latest version), "all",
    "latest N", or the specific versions "1, 2"."""
    policy = config.version_policy
    which = policy.WhichOneof("policy_choice")
    if which == "all":
        return "all"
    if which == "latest":
        return f"latest {policy.latest.num_versions}"
    return ", ".join(str(v) for v in policy.specific.versions) if which == "specific" else ""


def set_policy(config: model_config_pb2.ModelConfig, text: str) -> None:
    """The inverse of policy_text; RepositoryError naming the forms for anything else."""
    words = text.replace(",", " ").lower().split()
    config.ClearField("version_policy")
    if not words:
        return
    if words == ["all"]:
        config.version_policy.all.SetInParent()
    elif words[0] == "latest" and len(words) == 2 and words[1].isdigit() and int(words[1]) > 0:
        config.version_policy.latest.num_versions = int(words[1])
    elif all(w.isdigit() and int(w) > 0 for w in words):
        config.version_policy.specific.versions.extend(sorted({int(w) for w in words}))
    else:
        raise RepositoryError(f"version policy {text!r}: use all, latest N, or versions such as 1, 2 "
                              "(empty: Triton's default, the latest version)")


def with_knobs(text: str, knobs: Knobs, source: str = CONFIG_FILE) -> Rewrite:
    """`text` with `knobs` set; raises ConfigParseError when `text` does not parse."""
    config = parse_pbtxt(text, source)
    config.max_batch_size = knobs.max_batch_size
    if knobs.dynamic_batching:
        batching = config.dynamic_batching
        batching.max_queue_delay_microseconds = knobs.max_queue_delay_us
        del batching.preferred_batch_size[:]
        batching.preferred_batch_size.extend(knobs.preferred_batch_sizes)
    else:
        config.ClearField("dynamic_batching")
    if knobs.instance_count is not None:
        if len(config.instance_group) > 1:
            raise RepositoryError("the config has several instance groups: set their counts in the text")
        group = config.instance_group[0] if config.instance_group else config.instance_group.add()
        group.count = knobs.instance_count
    if knobs.device_ids is not None:
        _set_device_ids(config, knobs.device_ids.strip())
    if knobs.versions is not None:
        set_policy(config, knobs.versions)
    return rewrite(text, config)


def _set_device_ids(config: model_config_pb2.ModelConfig, value: str) -> None:
    chosen = npu_ge.effective(npu_ge.string_parameters(config), DEVICE_IDS)
    key = chosen[0] if chosen else DEVICE_IDS  # keep the spelling the file uses
    if value:
        config.parameters[key].string_value = value
    elif key in config.parameters:
        del config.parameters[key]


def parse_sizes(text: str) -> tuple[int, ...]:
    """`8, 16` -> (8, 16); a clear error for anything else."""
    sizes = []
    for part in (p.strip() for p in text.replace(" ", ",").split(",")):
        if not part:
            continue
        if not part.isdigit():
            raise RepositoryError(f"preferred batch sizes: {part!r} is not a whole number (write e.g. 4, 8)")
        sizes.append(int(part))
    return tuple(sizes)


# -- on disk / live in Triton / edited ----------------------------------------------------
@dataclass(frozen=True)
class LiveComparison:
    """Fields a config file sets that Triton's live config lacks or holds with another value.

    Fields only Triton has are its defaults (it normalizes every config) and do not count."""

    differing: tuple[str, ...]

    @property
    def same(self) -> bool:
        return not self.differing


def compare_with_live(text: str, live: model_config_pb2.ModelConfig) -> LiveComparison:
    """Raises ConfigParseError when `text` does not parse."""
    return LiveComparison(tuple(differing_fields(to_dict(parse_pbtxt(text)), to_dict(live))))


def differing_fields(wanted: Any, live: Any, path: str = "") -> list[str]:
    """Paths of the fields set in `wanted` that `live` lacks or holds with another value."""
    if isinstance(wanted, dict):
        if not isinstance(live, dict):
            return [path or "(the whole config)"]
        return [d for key, value in wanted.items()
                for d in differing_fields(value, live.get(key), f"{path}.{key}" if path else key)]
    if isinstance(wanted, list):
        if not isinstance(live, list) or len(live) != len(wanted):
            return [path]
        return [d for i, (w, v) in enumerate(zip(wanted, live, strict=True))
                for d in differing_fields(w, v, f"{path}[{i}]")]
    return [] if wanted == live else [path]
