"""The request as curl and as Python carries user strings (model, version, input and output
names) only as quoted data, never as code: a model named `m\"\"\"+__import__("os").system(...)`
made the script's docstring end early and run the call. And a snippet costs what its data
costs: a large tensor goes as binary data, not as a JSON list of Python floats (3 GB and 33 s
for 256 MB), and a request over the snippet limit is refused with the cause and the fix.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest

from geadmin.errors import InputTooLargeError
from geadmin.ops.infer.request import InferRequest, InferResult
from geadmin.ops.infer.snippets import (
    BINARY_BODY_FILE,
    JSON_DATA_LIMIT_BYTES,
    MAX_SNIPPET_DATA_BYTES,
    PY_INPUTS_FILE,
    curl_command,
    python_snippet,
    snippet_data_bytes,
    wire_bytes,
)
from geadmin.triton.client import Tensor
from pages.ui.tensors import Sent, build_snippets, with_snippets_if_cheap
from tests.support.memory import peak_bytes

MIB = 1 << 20
HOSTILE = [
    'm"""+__import__("os").system("echo INJECTED")+"""',
    "m'''+__import__('os').system('echo INJECTED')+'''",
    'm"\n__import__("os").system("echo INJECTED")\n#',
    "m\\",
    'm\\"""',
    "m\u2028__import__('os').system('echo INJECTED')",
    "$(echo INJECTED)`echo INJECTED`;echo INJECTED'\"",
]


def small_request(model: str = "m", version: str = "", names: tuple[str, str] = ("x", "y")) -> InferRequest:
    tensors = (Tensor(names[0], "FP32", np.arange(4, dtype=np.float32).reshape(1, 4)),
               Tensor("t", "BYTES", np.array([b"ok"], dtype=np.object_)))
    return InferRequest(model, tensors, (names[1],), 0, version)


def calls(source: str) -> list[str]:
    """Every call the script makes, as the AST names what is called."""
    return sorted(ast.dump(node.func) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call))


def assigned(source: str, name: str) -> object:
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} is not assigned")


# -- no code from user strings -------------------------------------------------------------------
@pytest.mark.parametrize("hostile", HOSTILE)
@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "grpc://127.0.0.1:8001", "https://h:8443"])
def test_hostile_names_and_versions_stay_data_in_the_python_script(hostile: str, url: str) -> None:
    benign = python_snippet(url, small_request()).text
    for request in (small_request(model=hostile), small_request(version=hostile),
                    small_request(names=(hostile, hostile))):
        script = python_snippet(url, request).text
        assert calls(script) == calls(benign), "the script makes a call the template does not"
        assert assigned(script, "MODEL") == request.model and assigned(script, "VERSION") == request.version
        assert assigned(script, "OUTPUTS") == list(request.outputs)
        docstring = ast.get_docstring(ast.parse(script)) or ""
        assert hostile not in docstring


def stub_tritonclient(root: Path) -> Path:
    """A `tritonclient` that records what the script asks of it and answers one output."""
    package = root / "tritonclient"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    stub = '''
import json, sys
import numpy as np

class InferInput:
    def __init__(self, name, shape, datatype):
        self.name = name
    def set_data_from_numpy(self, data):
        self.data = data

class InferRequestedOutput:
    def __init__(self, name, class_count=0):
        self.name = name

class Result:
    def get_response(self, as_json=False):
        return {"outputs": [{"name": "y", "datatype": "FP32"}]}
    def as_numpy(self, name):
        return np.zeros(2, np.float32)

class InferenceServerClient:
    def __init__(self, url, ssl=False):
        self.url = url
    def infer(self, model, inputs, model_version="", outputs=None):
        print(json.dumps({"model": model, "version": model_version, "inputs": [i.name for i in inputs],
                          "outputs": [o.name for o in outputs or []]}), file=sys.stderr)
        return Result()
'''
    (package / "http.py").write_text(stub)
    (package / "grpc.py").write_text(stub)
    return root


@pytest.mark.parametrize("hostile", HOSTILE[:3])
def test_a_script_made_for_a_hostile_model_runs_only_the_request(tmp_path: Path, hostile: str) -> None:
    stubs = stub_tritonclient(tmp_path / "stubs")
    request = small_request(model=hostile, version=hostile, names=(hostile, hostile))
    script = python_snippet("http://127.0.0.1:8000", request).text
    (tmp_path / "repro.py").write_text(script)
    done = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(stubs)})
    assert done.returncode == 0, done.stderr
    assert "INJECTED" not in done.stdout
    asked = json.loads(done.stderr.strip().splitlines()[-1])
    assert asked == {"model": hostile, "version": hostile, "inputs": [hostile, "t"], "outputs": [hostile]}


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_stay_single_words_of_the_curl_command(tmp_path: Path, hostile: str) -> None:
    fake = tmp_path / "curl"
    fake.write_text('#!/bin/sh\nprintf "%s\\0" "$@"\n')  # prints its arguments, NUL-separated
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    snippet = curl_command("http://127.0.0.1:8000", small_request(model=hostile, version="2",
                                                                  names=(hostile, hostile)))
    words = shlex.split(snippet.text)
    done = subprocess.run(["bash", "-c", snippet.text], capture_output=True, timeout=60,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert done.returncode == 0 and b"INJECTED" not in done.stderr
    assert ["curl", *done.stdout.decode().split("\0")[:-1]] == words
    # The name is one path segment, percent-encoded as tritonclient's own HTTP client does it.
    segment = quote(hostile, safe="")
    assert words[words.index("POST") + 1] == f"http://127.0.0.1:8000/v2/models/{segment}/versions/2/infer"
    body = json.loads(words[words.index("--data-binary") + 1])
    assert body["inputs"][0]["name"] == hostile and body["outputs"][0]["name"] == hostile


# -- size ------------------------------------------------------------------------------------------
def fp32_request(n_bytes: int) -> InferRequest:
    data = np.random.default_rng(0).random(n_bytes // 4, dtype=np.float32)
    return InferRequest("m", (Tensor("x", "FP32", data),))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("make", [curl_command, python_snippet])
def test_a_request_over_the_snippet_limit_is_refused_before_anything_is_encoded(make: Any) -> None:
    request = fp32_request(MAX_SNIPPET_DATA_BYTES + 4 * MIB)
    raised, peak = peak_bytes(lambda: make("http://127.0.0.1:8000", request))
    assert isinstance(raised, InputTooLargeError), raised
    assert str(raised).startswith("the request carries 20.0 MiB of tensor data; a curl or Python "
                                  "snippet carries at most 16.0 MiB")
    assert peak < MIB


@pytest.mark.timeout(300)
def test_a_large_tensor_goes_to_curl_as_binary_data_at_the_cost_of_its_bytes() -> None:
    request = fp32_request(4 * MIB)
    snippet, peak = peak_bytes(lambda: curl_command("http://h:8000", request))
    assert set(snippet.files) == {BINARY_BODY_FILE} and f"@{BINARY_BODY_FILE}" in snippet.text
    length = int(snippet.text.split("Inference-Header-Content-Length: ")[1].split("'")[0])
    body = snippet.files[BINARY_BODY_FILE]
    header = json.loads(body[:length])
    assert header["inputs"][0]["parameters"] == {"binary_data_size": 4 * MIB}
    assert body[length:] == wire_bytes(request.inputs[0])
    assert peak < 3 * 4 * MIB  # the payload, the body, a margin: no list of Python floats


def test_json_stays_the_format_of_small_requests() -> None:
    request = fp32_request(JSON_DATA_LIMIT_BYTES)
    snippet = curl_command("http://h:8000", request)
    assert "Content-Type: application/json" in snippet.text and BINARY_BODY_FILE not in snippet.files
    assert snippet_data_bytes(request) == JSON_DATA_LIMIT_BYTES
    assert BINARY_BODY_FILE in curl_command("http://h:8000", fp32_request(JSON_DATA_LIMIT_BYTES + 4)).files


def test_the_python_script_of_a_large_request_reads_its_inputs_from_a_file() -> None:
    request = fp32_request(4 * MIB)
    snippet, peak = peak_bytes(lambda: python_snippet("http://h:8000", request))
    assert set(snippet.files) == {PY_INPUTS_FILE}
    assert peak < 6 * 4 * MIB  # base64 (4/3 of the bytes) in a JSON document, a few copies


def test_bytes_tensors_count_their_real_lengths() -> None:
    words = np.empty(3, dtype=np.object_)
    words[:] = [b"a" * 10, b"", b"bc"]
    assert snippet_data_bytes(InferRequest("m", (Tensor("t", "BYTES", words),))) == 3 * 4 + 12


# -- the Playground makes a large request's snippets when asked ------------------------------------
def sent_for(request: InferRequest) -> Sent:
    result = InferResult(request.model, "1", "http", (), 1.0, None)
    return Sent("local", request.model, request, result, {}, None, None,
                urls=("http://h:8000", "http://h:8000"), output_types={"y": "FP32"})


def test_the_playground_makes_only_a_small_requests_snippets_with_the_answer() -> None:
    small = with_snippets_if_cheap(sent_for(fp32_request(JSON_DATA_LIMIT_BYTES)))
    assert small.python is not None and small.curl is not None
    assert small.curl.text == curl_command("http://h:8000", small.request, output_types={"y": "FP32"}).text
    unbuilt = sent_for(fp32_request(4 * MIB))
    large, peak = peak_bytes(lambda: with_snippets_if_cheap(unbuilt))
    assert large.python is None and large.curl is None and peak < MIB  # made when the button asks
    asked = build_snippets(large)
    assert asked.python is not None and asked.curl is not None and BINARY_BODY_FILE in asked.curl.files
    with pytest.raises(InputTooLargeError):
        with_snippets_if_cheap(sent_for(fp32_request(MAX_SNIPPET_DATA_BYTES + 4)))
