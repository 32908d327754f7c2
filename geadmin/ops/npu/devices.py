"""What draining a chip means for one model's config, and whether moving its instances fits.

`drained_config` reads the model's config.pbtxt and returns it with the faulted chip taken
out of `device_ids` (the spelling the file uses is kept; comments and layout survive through
`geadmin.repository.rewrite`). Refused, never guessed: a config that names no `device_ids`
(the backend's default devices, which geadmin cannot see), one the backend would reject,
one that does not name the chip, or one whose only device is the chip.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from geadmin.errors import GeAdminError, RepositoryError
from geadmin.repository import npu_ge_params as npu_ge
from geadmin.repository import store
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.repository.rewrite import rewrite
from geadmin.telemetry.sources.npu import devices_from_triton
from geadmin.telemetry.sources.scrape import scrape

DEVICE_IDS = "device_ids"
MIB = 1 << 20


@dataclass(frozen=True)
class Drained:
    model: str
    text: str  # the new config.pbtxt
    base_text: str  # the file as read
    sha256: str  # of the file as read: the apply refuses when it changed since
    before: str  # device_ids as the file has them
    after: str  # without the chip
    remaining: tuple[int, ...]


def drained_config(repository: Path, model: str, chip: int) -> Drained:
    """`model`'s config without `chip` in its device_ids; RepositoryError with the reason when
    it cannot be drained (see the module docstring)."""
    current = store.read_config(repository, model)
    config = parse_pbtxt(current.text, str(current.path))
    chosen = npu_ge.effective(npu_ge.string_parameters(config), DEVICE_IDS)
    if chosen is None:
        raise RepositoryError(f"{model!r}'s config names no device_ids: its instances run on the backend's "
                              "default devices, which geadmin cannot see; set device_ids (without chip "
                              f"{chip}) in the Config editor")
    key, value = chosen
    ids = npu_ge.parse_device_ids(value)
    if ids is None:
        raise RepositoryError(f"{model!r}'s {key} {value!r} is not a list of device ids: fix it first")
    if chip not in ids:
        raise RepositoryError(f"{model!r}'s {key} {value!r} does not name chip {chip}: nothing to drain")
    remaining = tuple(i for i in ids if i != chip)
    if not remaining:
        raise RepositoryError(f"chip {chip} is {model!r}'s only device ({key} {value!r}): draining it leaves "
                              "no device; give the model another NPU (or another server) first")
    after = ",".join(str(i) for i in remaining)
    config.parameters[key].string_value = after
    return Drained(model, rewrite(current.text, config).text, current.text, current.sha256, value, after,
                   remaining)


@dataclass(frozen=True)
class MoveCheck:
    refused: bool
    message: str


def move_refusal(metrics_url: str | None, chip: int, remaining: tuple[int, ...]) -> MoveCheck:
    """Whether the HBM the faulted chip holds fits in the other devices' free HBM, from npu_ge's
    device metrics on Triton's /metrics (the tuner's source). Not checked (said) without them."""
    unchecked = MoveCheck(False, "NPU memory not checked: no npu_ge device metrics on Triton's /metrics")
    if not metrics_url:
        return unchecked
    try:
        devices = {d.id: d for d in devices_from_triton(scrape(metrics_url, timeout_s=5.0))}
    except GeAdminError:
        return unchecked
    held = devices.get(chip)
    targets = [devices[i] for i in remaining if i in devices]
    if held is None or held.hbm_used_bytes is None or not targets:
        return unchecked
    free = sum((d.hbm_total_bytes or 0) - (d.hbm_used_bytes or 0) for d in targets)
    where = ", ".join(str(d.id) for d in targets)
    if held.hbm_used_bytes > free:
        return MoveCheck(True, f"not moved: chip {chip} holds {held.hbm_used_bytes / MIB:.0f} MiB and "
                               f"device(s) {where} have {free / MIB:.0f} MiB free; free memory there first")
    return MoveCheck(False, f"NPU memory checked: {held.hbm_used_bytes / MIB:.0f} MiB to move, "
                            f"{free / MIB:.0f} MiB free on device(s) {where}")
