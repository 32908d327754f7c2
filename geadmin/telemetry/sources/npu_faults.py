"""NPU faults as each source's page or text reports them: the driver's 32-bit fault codes per chip.

Three sources, the same ones `geadmin.telemetry.sources.detect` reads for devices:

1. npu-exporter: `npu_chip_info_error_code{id}` (the code as a decimal number, 0 = none), the
   numbered `npu_chip_info_error_code_1`..`_9` series of exporters that report several codes
   (MindCluster's npu-exporter keeps up to 10 per chip), `npu_chip_info_health_status`
   (1 healthy, 0 unhealthy, -1 the exporter could not read it), `npu_chip_info_link_status`
   (1 UP, 0 DOWN) and `npu_chip_info_network_status` (1 healthy, 0 not) where present;
2. `npu-smi` text (a saved file as with `--npu-smi-file`, or npu-smi on PATH): the `info`
   table's Health column and `info -t health -i N -c M`'s Health Status / Error Code lines
   (`geadmin.telemetry.sources.npu_smi_health` parses them);
3. npu_ge on Triton's /metrics: `npu_ge_device_errors_total{device,code}` — ACL errors of a
   failed execute that mean the device or its memory is bad, counted per device — and
   `npu_ge_device_lost_total` (per instance; its device from `npu_ge_instance_device`).

A chip reported unhealthy with no code is a ChipFault with `code=None`: never dropped. Outside
input is data: a value that is not a 32-bit code (NaN, negative, fractional, too big) or a
chip id that is not a small number is left out with a note, never a crash; a page with more
than MAX_FAULTS faults is cut there, with a note.

Each parser reads what it is given; `geadmin.telemetry.sources.fault_reading.read_faults`
fetches every source available and reads them all at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from geadmin.telemetry.sources import npu_smi_health
from geadmin.telemetry.sources.npu_smi_health import ChipHealthReport
from geadmin.telemetry.sources.scrape import Sample, Scrape

SOURCE_EXPORTER = "npu-exporter"
SOURCE_NPU_SMI = "npu-smi"
SOURCE_NPU_GE = "npu_ge"

MAX_CODE = 0xFFFFFFFF
MAX_CHIP_ID = 65_535
MAX_FAULTS = 1024  # per source and read: 16 chips x 10 codes is 160
MAX_NOTES = 20
ERROR_CODE = "npu_chip_info_error_code"


@dataclass(frozen=True)
class ChipFault:
    """One fault code on one chip, as one source reports it at one read."""

    chip: int  # the device id ACL and npu_ge use (NpuDevice.id)
    code: int | None  # the 32-bit fault code; None: the chip is reported unhealthy without one
    source: str  # SOURCE_*
    node: str = ""  # the host ("" for this one); a fleet sets the member's node label
    healthy: bool | None = None  # the chip's health as the source says it (None: not said)
    detail: str = ""  # what the source said besides the code (npu_ge: the ACL error and count)
    # npu_ge's counters count since Triton started, so a fault there is present while its count
    # rises (geadmin.telemetry.history.faults); None: a source that says the fault is there now
    count: float | None = None

    @property
    def code_hex(self) -> str:
        """The driver's code as `0x%08X`; npu_ge's ACL error codes are shown as `ACL <n>`."""
        if self.code is None:
            return "none"
        return f"ACL {self.code}" if self.source == SOURCE_NPU_GE else f"0x{self.code:08X}"

    @property
    def key(self) -> tuple[str, int, int | None]:
        return (self.node, self.chip, self.code)


class FaultNotes:
    """Notes of one read, bounded: after MAX_NOTES only a count."""

    def __init__(self, into: list[str] | None) -> None:
        self.into = into
        self.dropped = 0

    def add(self, text: str) -> None:
        if self.into is None:
            return
        if len(self.into) < MAX_NOTES:
            self.into.append(text)
        else:
            self.dropped += 1

    def close(self) -> None:
        if self.into is not None and self.dropped:
            self.into.append(f"... and {self.dropped} more values left out")


# -- npu-exporter --------------------------------------------------------------------------
def faults_from_exporter(page: Scrape, node: str = "", *, notes: list[str] | None = None) -> list[ChipFault]:
    """The faults npu-exporter's page reports: each non-zero code of each chip, and each chip
    reported unhealthy (or with a link / network down) without one."""
    said = FaultNotes(notes)
    codes: dict[int, list[int]] = {}
    health: dict[int, bool | None] = {}
    extras: dict[int, list[str]] = {}
    for sample in page.samples:
        kind = _exporter_kind(sample.name) if sample.name.startswith("npu_chip_info_") else None
        chip = _chip(sample, "id", said) if kind is not None else None
        if chip is None:
            continue
        if kind == "code":
            code = _code(sample, said)
            chip_codes = codes.setdefault(chip, []) if code else []
            if code and code not in chip_codes:
                chip_codes.append(code)
        elif kind == "health":
            health[chip] = _status(sample, said)
        elif _status(sample, said) is False:
            extras.setdefault(chip, []).append("link DOWN" if kind == "link" else "network unhealthy")
    faults: list[ChipFault] = []
    for chip in sorted(set(codes) | set(health) | set(extras)):
        healthy = health.get(chip)
        detail = "; ".join(([] if healthy is not False else ["npu_chip_info_health_status 0 (unhealthy)"])
                           + extras.get(chip, []))
        for code in codes.get(chip, []):
            faults.append(ChipFault(chip, code, SOURCE_EXPORTER, node, healthy, detail))
        if chip not in codes and (healthy is False or chip in extras):
            faults.append(ChipFault(chip, None, SOURCE_EXPORTER, node, healthy, detail))
    said.close()
    return capped(faults, SOURCE_EXPORTER, notes)


def _exporter_kind(name: str) -> str | None:
    if name == ERROR_CODE:
        return "code"
    if name.startswith(ERROR_CODE + "_"):
        suffix = name[len(ERROR_CODE) + 1:]
        return "code" if suffix.isascii() and suffix.isdigit() and len(suffix) <= 2 else None
    return {"npu_chip_info_health_status": "health", "npu_chip_info_link_status": "link",
            "npu_chip_info_network_status": "network"}.get(name)


def _chip(sample: Sample, label: str, said: FaultNotes) -> int | None:
    text = sample.label(label)
    if (number := _number(text, MAX_CHIP_ID)) is not None:
        return number
    said.add(f"{sample.name}: {label}={_clip(text)!r} is not a chip id; left out")
    return None


def _code(sample: Sample, said: FaultNotes) -> int | None:
    """The sample's value as a 32-bit code (0: none); None with a note when it is not one."""
    value = sample.value
    if math.isfinite(value) and value == int(value) and 0 <= value <= MAX_CODE:
        return int(value)
    said.add(f"{sample.name}{{id={sample.label('id')}}} = {value!r} is not a 32-bit fault code; left out")
    return None


def _status(sample: Sample, said: FaultNotes) -> bool | None:
    """1 -> True, 0 -> False, -1 (the exporter could not read it) -> None; anything else a note."""
    if sample.value == 1:
        return True
    if sample.value == 0:
        return False
    if sample.value != -1:
        said.add(f"{sample.name}{{id={sample.label('id')}}} = {sample.value!r} is not a status; left out")
    return None


# -- npu_ge on Triton's /metrics -------------------------------------------------------------
DEVICE_ERRORS = "npu_ge_device_errors_total"
DEVICE_LOST = "npu_ge_device_lost_total"


def faults_from_triton(page: Scrape, node: str = "", *, notes: list[str] | None = None) -> list[ChipFault]:
    """npu_ge's device errors (per device and ACL code) and lost devices on Triton's page."""
    said = FaultNotes(notes)
    errors: dict[tuple[int, int], float] = {}
    for sample in page.find(DEVICE_ERRORS):
        device = _chip(sample, "device", said)
        code = _number(sample.label("code"), MAX_CODE)
        if device is None or not math.isfinite(sample.value) or sample.value <= 0:
            continue
        if code is None:
            said.add(f"{DEVICE_ERRORS}{{device={device}}}: code={_clip(sample.label('code'))!r} "
                     "is not an ACL code; left out")
            continue
        key = (device, code)
        errors[key] = errors.get(key, 0.0) + sample.value
    faults = [ChipFault(device, code, SOURCE_NPU_GE, node, None,
                        f"{_count(n)} failed executes with ACL error {code} since Triton started", n)
              for (device, code), n in sorted(errors.items())]
    faults += _lost_devices(page, node, said)
    said.close()
    return capped(faults, SOURCE_NPU_GE, notes)


def _lost_devices(page: Scrape, node: str, said: FaultNotes) -> list[ChipFault]:
    held = _instance_devices(page)
    # A lost device breaks its instance until the model is reloaded (npu_ge_instance_broken), and
    # the instance's counter goes with it: present while the counter is there, not while it rises.
    lost: dict[tuple[int, int | None], list[str]] = {}
    for sample in page.find(DEVICE_LOST):
        if not math.isfinite(sample.value) or sample.value <= 0:
            continue
        who = _instance(sample)
        device = _number(sample.label("device"), MAX_CHIP_ID) if sample.label("device") is not None \
            else held.get(who)
        if device is None:
            said.add(f"{DEVICE_LOST}: instance {_clip(who[2])!r} of {_clip(who[0])!r} has no known device; "
                     "left out")
            continue
        code = _number(sample.label("code"), MAX_CODE)
        what = f"instance {who[2]} of {who[0]}" if who[0] else "an instance"
        lost.setdefault((device, code), []).append(f"{what} lost its device ({_count(sample.value)}x)")
    return [ChipFault(device, code, SOURCE_NPU_GE, node, False, "; ".join(sorted(what)))
            for (device, code), what in sorted(lost.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1))]


def _instance_devices(page: Scrape) -> dict[tuple[str, str, str], int]:
    found: dict[tuple[str, str, str], int] = {}
    for sample in page.find("npu_ge_instance_device"):
        device = _number(sample.label("device"), MAX_CHIP_ID)
        if sample.value == 1 and device is not None:
            found[_instance(sample)] = device
    return found


def _instance(sample: Sample) -> tuple[str, str, str]:
    return (sample.label("model") or "", sample.label("version") or "", sample.label("instance") or "")


def _number(text: str | None, limit: int) -> int | None:
    """A label's value as a whole number from 0 to `limit`, else None."""
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 12:
        return None
    return int(text) if int(text) <= limit else None


# -- npu-smi -------------------------------------------------------------------------------
def faults_from_npu_smi(text: str, node: str = "", *, notes: list[str] | None = None) -> list[ChipFault]:
    """The faults in npu-smi text: `info` (the Health column), `info -t health -i N -c M`
    (Health Status, Error Code in hex), or a capture with both. Text with neither is an
    NpuSmiParseError quoting what it got."""
    return capped(faults_from_health(npu_smi_health.parse(text, notes), node), SOURCE_NPU_SMI, notes)


# npu-smi's Health values: Warning is a minor alarm on a chip that serves; UNKNOWN is a device
# that is absent or not started.
HEALTHY_WORDS = {"ok": True, "warning": True, "alarm": False, "critical": False, "unknown": False}


def faults_from_health(reports: list[ChipHealthReport], node: str = "") -> list[ChipFault]:
    """One ChipFault per code of each chip, and one with code None for a chip whose Health is
    not OK and that has no code."""
    faults: list[ChipFault] = []
    for report in reports:
        health = report.health or ""
        healthy = HEALTHY_WORDS.get(health.lower())
        detail = f"Health {health}" if health else ""
        if report.information:
            detail = f"{detail}: {report.information}" if detail else report.information
        faults += [ChipFault(report.device, code, SOURCE_NPU_SMI, node, healthy, detail)
                   for code in report.codes]
        if not report.codes and health and health.upper() != "OK":
            faults.append(ChipFault(report.device, None, SOURCE_NPU_SMI, node, healthy, detail))
    return faults


def capped(faults: list[ChipFault], source: str, notes: list[str] | None) -> list[ChipFault]:
    if len(faults) > MAX_FAULTS and notes is not None:
        notes.append(f"{source} reported {len(faults)} faults; only the first {MAX_FAULTS} are kept")
    return faults[:MAX_FAULTS]


def _count(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def _clip(value: object, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "…"
