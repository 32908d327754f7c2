"""Running `npu-smi`, and any npu-smi text into `NpuDevice`s.

`run` starts the binary with an argument list (no shell) in its own process group, so a
timeout ends it and anything it started; every way it can fail to run goes through one table
(`RUN_ERRORS`) into an `NpuSmiError`. `read_devices` runs `npu-smi info` and, per card,
`npu-smi info -t usages -i N`. `parse` tells which output it was given and hands it to its
reader: the `info` table or an `info watch` capture (geadmin.telemetry.sources.npu_smi_table),
or `info -t ...` key/value blocks (geadmin.telemetry.sources.npu_smi_details). Anything else —
an error message, an empty page, random bytes — is an `NpuSmiParseError` quoting what it got.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence

from geadmin.errors import NpuSmiError, NpuSmiParseError
from geadmin.telemetry.sources.npu import NpuDevice
from geadmin.telemetry.sources.npu_smi_details import devices_from_details, parse_details, with_details
from geadmin.telemetry.sources.npu_smi_table import is_row, parse_info, parse_watch
from geadmin.telemetry.sources.npu_smi_values import first_line, quote

DEFAULT_TIMEOUT_S = 10.0

# -- running npu-smi -------------------------------------------------------------------
RUN_ERRORS: tuple[tuple[type[BaseException], str], ...] = (  # first isinstance match wins
    (FileNotFoundError, "is not installed there (no Ascend driver on this host?)"),
    (PermissionError, "may not be run by this user (the driver's npu-smi needs root or HwHiAiUser)"),
    (subprocess.TimeoutExpired, "did not answer in time (the driver may be hung)"),
    (OSError, "could not be started"),
)


def run(binary: str, args: Sequence[str], *, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """stdout of `binary args` (an argument list, no shell); a failure is an NpuSmiError."""
    command = " ".join([binary, *args])
    try:
        # its own process group, so a timeout ends npu-smi and anything it started
        process = subprocess.Popen([binary, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, errors="replace", start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            raise
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = next(text for exc_type, text in RUN_ERRORS if isinstance(exc, exc_type))
        raise NpuSmiError(f"`{command}` {why} ({exc})") from exc
    if process.returncode != 0:
        said = first_line(stderr) or first_line(stdout) or "no output"
        raise NpuSmiError(f"`{command}` exited with status {process.returncode}: {said}")
    return stdout


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()


def read_devices(binary: str = "npu-smi", *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 details: bool = True) -> list[NpuDevice]:
    """`npu-smi info`, plus `npu-smi info -t usages -i N` per card for vector / cube figures.
    A card whose usages cannot be read keeps the table's figures (the rest stay None)."""
    devices = parse(run(binary, ["info"], timeout_s=timeout_s))
    if not details:
        return devices
    for npu_id in sorted({d.npu_id for d in devices if d.npu_id is not None}):
        try:
            blocks = parse_details(run(binary, ["info", "-t", "usages", "-i", str(npu_id)],
                                       timeout_s=timeout_s))
        except NpuSmiError:
            continue
        devices = [with_details(d, blocks) if d.npu_id == npu_id else d for d in devices]
    return devices


# -- any npu-smi text --------------------------------------------------------------------
def parse(text: str) -> list[NpuDevice]:
    """Devices from an `npu-smi info` table, an `info watch` capture, or `info -t ... -i N`
    key/value output that names its NPU ID."""
    lines = text.splitlines()
    if any(is_row(line) for line in lines):
        return parse_info(text)
    if any(line.strip().startswith("NpuID(") for line in lines):
        return parse_watch(text)
    if any(":" in line for line in lines):
        return devices_from_details(parse_details(text), text)
    raise NpuSmiParseError(f"not npu-smi output: {quote(text)}")
