"""backend_src/include/npu_ge/triton_api.h against the real Triton C API of the wheel's
libtritonserver (no Triton headers ship in any package we can install: nvidia-pytriton has the
library only, the `tritonserver` PyPI name is a placeholder here). The header hand-declares the
subset npu_ge uses, so this checks what can be checked against the library itself:

- every function the header declares as provided by the server is exported by it, and every
  TRITON* symbol the built libtriton_npu_ge.so imports is declared in the header;
- every enum value is the one the library gives that name: its own name functions
  (TRITONSERVER_DataTypeString, ...ErrorCodeString, ...MemoryTypeString, ...ParameterTypeString,
  ...InstanceGroupKindString), the prefix letter TRITONSERVER_LogMessage prints per log level
  (verbose off by default), and how TRITONSERVER_MetricNew / MetricIncrement treat each kind;
- the API versions the header was written for are the library's (major equal, minor not newer).

The checker also runs on a planted violation (a wrong value, a missing function) so it is known
to see one."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from geadmin.binaries import wheel_layout
from tests.support.npu_ge import REPO_ROOT, BackendBuild

pytestmark = pytest.mark.integration

HEADER = REPO_ROOT / "backend_src" / "include" / "npu_ge" / "triton_api.h"
ENUM = re.compile(r"typedef enum \w+ \{(?P<body>[^}]*)\} (?P<name>\w+);")
ENTRY = re.compile(r"(?P<key>TRITON\w+) = (?P<value>\d+)")
FUNCTION = re.compile(r"\b(?P<name>TRITON(?:SERVER|BACKEND)_\w+)\(")
VERSION = re.compile(r"#define NPU_GE_TRITONBACKEND_API_VERSION_(?P<part>MAJOR|MINOR) (?P<value>\d+)")

# Runs in a child with the wheel's libraries on LD_LIBRARY_PATH; prints what the library says.
PROBE = r'''
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
wanted = json.loads(sys.argv[2])
def text(fn, *args):
    f = getattr(lib, fn); f.restype = ctypes.c_char_p
    return f(*args).decode()
msg = lib.TRITONSERVER_ErrorMessage; msg.restype = ctypes.c_char_p; msg.argtypes = [ctypes.c_void_p]
new_error = lib.TRITONSERVER_ErrorNew; new_error.restype = ctypes.c_void_p
new_error.argtypes = [ctypes.c_int, ctypes.c_char_p]
code_string = lib.TRITONSERVER_ErrorCodeString; code_string.restype = ctypes.c_char_p
code_string.argtypes = [ctypes.c_void_p]
out = {"exports": [n for n in wanted if hasattr(lib, n)]}
out["datatype"] = {i: text("TRITONSERVER_DataTypeString", i) for i in range(16)}
out["memorytype"] = {i: text("TRITONSERVER_MemoryTypeString", i) for i in range(4)}
out["parametertype"] = {i: text("TRITONSERVER_ParameterTypeString", i) for i in range(6)}
out["instancegroupkind"] = {i: text("TRITONSERVER_InstanceGroupKindString", i) for i in range(5)}
out["errorcode"] = {i: code_string(new_error(i, b"probe")).decode() for i in range(9)}
out["log_enabled"] = {i: bool(lib.TRITONSERVER_LogIsEnabled(i)) for i in range(4)}
log = lib.TRITONSERVER_LogMessage; log.restype = ctypes.c_void_p
log.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
for i in range(3):
    log(i, b"probe.cc", 1, ("npu_ge_probe_level_%d" % i).encode())
family = ctypes.c_void_p()
new_family = lib.TRITONSERVER_MetricFamilyNew; new_family.restype = ctypes.c_void_p
new_family.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p]
new_metric = lib.TRITONSERVER_MetricNew; new_metric.restype = ctypes.c_void_p
new_metric.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]
increment = lib.TRITONSERVER_MetricIncrement; increment.restype = ctypes.c_void_p
increment.argtypes = [ctypes.c_void_p, ctypes.c_double]
out["metrickind"] = {}
for kind in range(4):
    err = new_family(ctypes.byref(family), kind, ("npu_ge_probe_%d" % kind).encode(), b"probe")
    if err:
        out["metrickind"][kind] = "family: " + msg(err).decode(); continue
    metric = ctypes.c_void_p()
    err = new_metric(ctypes.byref(metric), family, None, 0)
    if err:
        out["metrickind"][kind] = "metric: " + msg(err).decode(); continue
    err = increment(metric, -1.0)
    out["metrickind"][kind] = "decrement: " + (msg(err).decode() if err else "accepted")
for api in ("TRITONBACKEND_ApiVersion", "TRITONSERVER_ApiVersion"):
    major, minor = ctypes.c_uint32(), ctypes.c_uint32()
    getattr(lib, api)(ctypes.byref(major), ctypes.byref(minor))
    out[api] = [major.value, minor.value]
print(json.dumps(out))
'''


def parse_header(text: str) -> tuple[dict[str, dict[str, int]], list[str], tuple[int, int]]:
    """Enums (type -> constant -> value), the functions the server must provide, API version."""
    enums = {m["name"]: {e["key"]: int(e["value"]) for e in ENTRY.finditer(m["body"])}
             for m in ENUM.finditer(text)}
    provided = text.split("// ---- entry points implemented by npu_ge")[0]
    functions = sorted({m["name"] for m in FUNCTION.finditer(provided)})
    version = {m["part"]: int(m["value"]) for m in VERSION.finditer(text)}
    return enums, functions, (version["MAJOR"], version["MINOR"])


def probe_library(functions: list[str]) -> tuple[dict[str, Any], str]:
    layout = wheel_layout()
    assert layout is not None, "the nvidia-pytriton wheel is not installed in this venv"
    lib = next(layout.libs_dir.glob("libtritonserver-*.so"), None)
    assert lib is not None, f"no libtritonserver-*.so in {layout.libs_dir}"
    done = subprocess.run([sys.executable, "-c", PROBE, str(lib), json.dumps(functions)],
                          env={"LD_LIBRARY_PATH": str(layout.libs_dir), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    probed: dict[str, Any] = json.loads(done.stdout)
    return probed, done.stderr


def expected_name(enum: str, key: str) -> str:
    """What the library's name function says for constant `key` of `enum`, upper-cased with
    underscores for spaces."""
    suffix = key.split("_", 2)[2] if enum != "TRITONSERVER_InstanceGroupKind" else key.rsplit("_", 1)[1]
    if enum == "TRITONSERVER_DataType" and suffix == "INVALID":
        return "<INVALID>"
    return {"INVALID_ARG": "INVALID_ARGUMENT"}.get(suffix, suffix)  # "Invalid argument"


# Values the library cannot name: ErrorCodeString of Triton 2.51 has no case for CANCELLED (it
# says "<invalid code>"), so 7 is taken from Triton's tritonserver.h (FACTS.md), not checked here.
UNNAMED_BY_LIBRARY = {"TRITONSERVER_ERROR_CANCELLED": 7}


PROBED_AS = {"TRITONSERVER_DataType": "datatype", "TRITONSERVER_MemoryType": "memorytype",
             "TRITONSERVER_ParameterType": "parametertype", "TRITONSERVER_Error_Code": "errorcode",
             "TRITONSERVER_InstanceGroupKind": "instancegroupkind"}
LOG_PREFIX = {"INFO": "I", "WARN": "W", "ERROR": "E"}
METRIC_SIGN = {"COUNTER": "decrement: TRITONSERVER_METRIC_KIND_COUNTER", "GAUGE": "decrement: accepted",
               "HISTOGRAM": "metric: Bucket boundaries"}
NOT_PROBED = {"TRITONBACKEND_ArtifactType"}  # no library call tells its names (npu_ge never passes it)


def value_mismatch(enum: str, key: str, value: int, probed: dict[str, Any], log_text: str) -> str | None:
    """Why the library disagrees that `key` of `enum` is `value`; None when it agrees."""
    if UNNAMED_BY_LIBRARY.get(key) == value:
        return None
    if enum in PROBED_AS:
        said = str(probed[PROBED_AS[enum]].get(str(value), ""))
        ok = said.upper().replace(" ", "_") == expected_name(enum, key)
        return None if ok else f"{key} = {value}: the library names {value} '{said}'"
    if enum == "TRITONSERVER_LogLevel":
        level = key.rsplit("_", 1)[1]
        if level == "VERBOSE":
            ok = probed["log_enabled"].get(str(value)) is False  # verbose is off by default
        else:
            pattern = rf"^{LOG_PREFIX[level]}\d.*npu_ge_probe_level_{value}\b"
            ok = re.search(pattern, log_text, re.MULTILINE) is not None
        return None if ok else f"{key} = {value}: the library does not log {value} as {level}"
    if enum == "TRITONSERVER_MetricKind":
        said = str(probed["metrickind"].get(str(value), ""))
        ok = said.startswith(METRIC_SIGN[key.rsplit("_", 1)[1]])
        return None if ok else f"{key} = {value}: the library treats kind {value} as: {said}"
    return None if enum in NOT_PROBED else f"{enum}: no probe for this enum; add one"


def mismatches(enums: dict[str, dict[str, int]], functions: list[str], version: tuple[int, int],
               probed: dict[str, Any], log_text: str) -> list[str]:
    found = [f"{name}: declared but not exported by libtritonserver"
             for name in functions if name not in probed["exports"]]
    for enum, values in enums.items():
        found += [why for key, value in values.items()
                  if (why := value_mismatch(enum, key, value, probed, log_text)) is not None]
    backend = probed["TRITONBACKEND_ApiVersion"]
    if backend[0] != version[0] or backend[1] < version[1]:
        found.append(f"TRITONBACKEND API {version[0]}.{version[1]} declared; the library is "
                     f"{backend[0]}.{backend[1]}")
    return found


@pytest.fixture(scope="module")
def header_and_probe() -> tuple[str, dict[str, Any], str]:
    text = HEADER.read_text()
    _, functions, _ = parse_header(text)
    planted = ["TRITONSERVER_NoSuchCall"]
    probed, log_text = probe_library(functions + planted)
    return text, probed, log_text


def test_the_header_matches_the_wheels_libtritonserver(
    header_and_probe: tuple[str, dict[str, Any], str]
) -> None:
    text, probed, log_text = header_and_probe
    enums, functions, version = parse_header(text)
    assert len(functions) >= 60 and len(enums) >= 8  # the parser found the declarations
    assert mismatches(enums, functions, version, probed, log_text) == []


def test_the_check_reports_a_planted_wrong_value_and_a_missing_function(
    header_and_probe: tuple[str, dict[str, Any], str]
) -> None:
    text, probed, log_text = header_and_probe
    planted = (text.replace("TRITONSERVER_TYPE_FP32 = 11", "TRITONSERVER_TYPE_FP32 = 12")
                   .replace("TRITONSERVER_LOG_WARN = 1", "TRITONSERVER_LOG_WARN = 2")
                   .replace("TRITONSERVER_METRIC_KIND_GAUGE = 1", "TRITONSERVER_METRIC_KIND_GAUGE = 0")
                   .replace("// ---- TRITONBACKEND functions provided by the server",
                            "TRITONSERVER_Error* TRITONSERVER_NoSuchCall(void);\n"
                            "// ---- TRITONBACKEND functions provided by the server"))
    assert planted.count("NoSuchCall") == 1 and "TRITONSERVER_TYPE_FP32 = 12" in planted
    enums, functions, version = parse_header(planted)
    found = mismatches(enums, functions, version, probed, log_text)
    assert found == [
        "TRITONSERVER_NoSuchCall: declared but not exported by libtritonserver",
        "TRITONSERVER_TYPE_FP32 = 12: the library names 12 'FP64'",
        "TRITONSERVER_LOG_WARN = 2: the library does not log 2 as WARN",
        "TRITONSERVER_METRIC_KIND_GAUGE = 0: the library treats kind 0 as: decrement: "
        "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by non-negative values.",
    ], found


def test_every_triton_symbol_the_backend_imports_is_declared_in_the_header(npu_build: BackendBuild) -> None:
    _, functions, _ = parse_header(HEADER.read_text())
    lib = npu_build.lib_dir / "libtriton_npu_ge.so"
    done = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True, text=True,
                          timeout=60, check=True)
    imported = {line.split()[-1] for line in done.stdout.splitlines() if " TRITON" in line}
    assert imported, done.stdout[-2000:]
    assert sorted(imported - set(functions)) == []
    exported = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True,
                              timeout=60, check=True).stdout
    assert "TRITONBACKEND_ModelInstanceExecute" in exported  # the entry points, from the header's last part
    assert Path(HEADER).read_text().count("NPU_GE_EXPORT TRITONSERVER_Error*") >= 7
