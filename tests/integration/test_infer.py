"""Test inference against the real tritonserver: the sample models over HTTP and gRPC,
every dtype through an identity model, Triton's statistics breakdown, top-k with labels,
smoke requests, the curl command and Python snippet executed, and `geadmin infer`."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from geadmin.cli.main import main
from geadmin.errors import InferInputError, ModelNotFoundError, TritonRequestError
from geadmin.ops.infer.inputs import InputSource, SourceKind
from geadmin.ops.infer.outputs import parse_classification, read_labels, tensor_record, top_k
from geadmin.ops.infer.request import InferResult, build_request, infer, prepare, send, smoke_request
from geadmin.ops.infer.snippets import Snippet, curl_command, parse_http_response, python_snippet
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import SAMPLE_REPOSITORY
from geadmin.triton.client import TritonClient
from tests.support.processes import quick_stopping_triton
from tests.support.samples import DIGIT_NAMES, EXAMPLES, digit_png
from tests.support.transports import TRANSPORTS, url_for

pytestmark = pytest.mark.integration


ALL_TYPES = ["BOOL", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64",
             "FP16", "BF16", "FP32", "FP64", "BYTES"]

# An identity model with one input per Triton dtype (BF16 goes through dlpack: numpy has no bfloat16).
IDENTITY_CONFIG = """
name: "all_types"
backend: "python"
max_batch_size: 4
input [ {inputs} ]
output [ {outputs} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
IDENTITY_MODEL = '''
import json
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.names = [i["name"] for i in json.loads(args["model_config"])["input"]]

    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for name in self.names:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                out = "OUT_" + name[3:]
                if name == "IN_BF16":
                    outputs.append(pb_utils.Tensor.from_dlpack(out, tensor.to_dlpack()))
                else:
                    outputs.append(pb_utils.Tensor(out, tensor.as_numpy()))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
'''
BROKEN_CONFIG = """
name: "broken"
backend: "python"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""
BROKEN_MODEL = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError("broken on purpose: no weights"))
                for _ in requests]
'''


def _dims(datatype: str) -> str:
    return "[ -1 ]" if datatype == "FP32" else "[ 3 ]"  # one dynamic dim for the shape picker


def write_extra_models(repository: Path) -> None:
    kind = {"BYTES": "STRING"}
    entries = [f'{{ name: "PREFIX_{t}" data_type: TYPE_{kind.get(t, t)} dims: {_dims(t)} }}'
               for t in ALL_TYPES]
    (repository / "all_types" / "1").mkdir(parents=True)
    (repository / "all_types" / "config.pbtxt").write_text(IDENTITY_CONFIG.format(
        inputs=", ".join(e.replace("PREFIX", "IN") for e in entries),
        outputs=", ".join(e.replace("PREFIX", "OUT") for e in entries)))
    (repository / "all_types" / "1" / "model.py").write_text(IDENTITY_MODEL)
    (repository / "broken" / "1").mkdir(parents=True)
    (repository / "broken" / "config.pbtxt").write_text(BROKEN_CONFIG)
    (repository / "broken" / "1" / "model.py").write_text(BROKEN_MODEL)
    labelled = repository / "digits_labelled"
    shutil.copytree(SAMPLE_REPOSITORY / "digits_classifier", labelled,
                    ignore=shutil.ignore_patterns("__pycache__"))
    config = (labelled / "config.pbtxt").read_text()
    config = config.replace('name: "digits_classifier"', 'name: "digits_labelled"')
    config = config.replace('dims: [ 10 ] }', 'dims: [ 10 ] label_filename: "digit_names.txt" }')
    assert "label_filename" in config
    (labelled / "config.pbtxt").write_text(config)
    (labelled / "digit_names.txt").write_text("\n".join(DIGIT_NAMES) + "\n")


@pytest.fixture(scope="module")
def extra_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    root = tmp_path_factory.mktemp("infer_models")
    repository = root / "model_repository"
    repository.mkdir()
    write_extra_models(repository)
    server = quick_stopping_triton(repository, log_path=root / "tritonserver.log")
    server.start()
    yield server
    server.stop()


def records(result: InferResult) -> list[dict[str, Any]]:
    return sorted((tensor_record(t) for t in result.outputs), key=lambda r: r["name"])


def run_snippet(snippet: Snippet, cwd: Path, python: bool) -> str:
    for name, content in snippet.files.items():
        (cwd / name).write_bytes(content)
    if python:
        (cwd / "snippet.py").write_text(snippet.text)
        command: list[str] | str = [sys.executable, "snippet.py"]
    else:
        assert shutil.which("curl"), "curl is needed (apt-get install curl)"
        command = snippet.text
    done = subprocess.run(command, shell=not python, cwd=cwd, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace") + done.stdout.decode(errors="replace")
    return done.stdout.decode("latin-1")


def snippet_records(output: str, python: bool) -> list[dict[str, Any]]:
    found = json.loads(output) if python else parse_http_response(output.encode("latin-1"))
    return sorted(found, key=lambda r: r["name"])


# -- sending ---------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_digits_classifier_answers_with_probabilities_and_the_server_breakdown(
    triton_server: TritonProcess, transport: str
) -> None:
    with TritonClient(url_for(triton_server, transport)) as client:
        spec = prepare(client, "digits_classifier")
        described = [(s.name, s.datatype, s.dims, s.batched) for s in spec.inputs]
        assert described == [("features", "FP32", (64,), True)]
        result = send(client, build_request(spec, batch_size=3, seed=11))
    assert result.protocol == transport and result.version == "1"
    probabilities = result.output("probabilities")
    assert probabilities.datatype == "FP32" and probabilities.shape == (3, 10)
    assert np.allclose(probabilities.data.sum(axis=1), 1.0, atol=1e-5)
    assert not probabilities.data.flags.writeable  # the result is frozen, its arrays too
    assert result.latency_ms > 0
    server = result.server
    assert server is not None, result.server_note
    assert server.requests == 1 and not server.approximate and result.server_note == ""
    assert server.compute_infer_us > 0 and server.queue_us >= 0
    # Triton ends a request's duration when it releases the request, just after the response
    # left: on a loaded machine that is a little past the client's own clock (2 ms allowed).
    assert 0 < server.total_us <= result.latency_ms * 1000 + 2000


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_image_through_the_pipeline_returns_its_digit(
    triton_server: TritonProcess, transport: str
) -> None:
    with TritonClient(url_for(triton_server, transport)) as client:
        for index in (0, 7):
            image = InputSource(SourceKind.IMAGE, digit_png(index))
            result = infer(client, "digits_pipeline", {"IMAGE": image})
            expected = int(EXAMPLES["labels"][index])
            assert result.output("LABEL").data.ravel().tolist() == [expected]
            assert result.output("LABEL_NAME").data.ravel().tolist() == [DIGIT_NAMES[expected].encode()]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bytes_in_and_out_with_chosen_outputs(triton_server: TritonProcess, transport: str) -> None:
    with TritonClient(url_for(triton_server, transport)) as client:
        result = infer(client, "text_normalize", {"TEXT": InputSource(SourceKind.TEXT, "  Ｈello   WORLD ")},
                       outputs=["NORMALIZED"])
    assert [t.name for t in result.outputs] == ["NORMALIZED"]
    assert result.output("NORMALIZED").data.tolist() == [[b"hello world"]]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_dtype_round_trips_through_the_identity_model(
    extra_server: TritonProcess, transport: str
) -> None:
    with TritonClient(url_for(extra_server, transport)) as client:
        spec = prepare(client, "all_types")
        assert sorted(s.datatype for s in spec.inputs) == sorted(ALL_TYPES)
        request = build_request(spec, shapes={"IN_FP32": [2, 5]}, batch_size=2, seed=3)
        result = send(client, request)
    assert len(result.outputs) == len(ALL_TYPES)
    for datatype in ALL_TYPES:
        sent, got = request.input(f"IN_{datatype}"), result.output(f"OUT_{datatype}")
        assert got.datatype == datatype
        assert got.shape == sent.shape == ((2, 5) if datatype == "FP32" else (2, 3))
        assert got.data.dtype == sent.data.dtype and got.data.tolist() == sent.data.tolist(), datatype


def test_a_mismatch_is_refused_before_sending(triton_server: TritonProcess) -> None:
    with TritonClient(triton_server.http_url) as client:
        before = client.model_statistics("digits_classifier")[0].inference_stats
        with pytest.raises(InferInputError) as caught:
            infer(client, "digits_classifier", {"features": InputSource(SourceKind.JSON, "[[1, 2, 3]]")})
        assert str(caught.value) == "input features expects FP32 [-1, 64]; got float32 [1, 3]"
        with pytest.raises(InferInputError, match="batch size 33 is over the model's max_batch_size 32"):
            infer(client, "digits_classifier", batch_size=33)
        after = client.model_statistics("digits_classifier")[0].inference_stats
    # Nothing was sent: Triton counted neither a success nor a failure.
    assert (after.success.count, after.fail.count) == (before.success.count, before.fail.count)


def test_unknown_models_and_rejected_requests_are_geadmin_errors(triton_server: TritonProcess) -> None:
    with TritonClient("grpc://" + triton_server.grpc_url) as client:
        with pytest.raises(ModelNotFoundError):
            infer(client, "no_such_model")
        request = build_request(prepare(client, "digits_classifier"))
        request = type(request)(request.model, request.inputs, ("no_such_output",))  # past the checks
        with pytest.raises(TritonRequestError, match="no_such_output"):
            send(client, request)


# -- top-k -----------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_top_k_with_labels_from_the_repository_and_from_triton_agree(
    extra_server: TritonProcess, transport: str
) -> None:
    features = np.load(SAMPLE_REPOSITORY / "digits_preprocess" / "1" / "scaler.npz")
    pixels = EXAMPLES["images"][:2].reshape(2, 64).astype(np.float32) / 255.0
    scaled = ((pixels - features["mean"]) / features["std"]).astype(np.float32)
    source = InputSource(SourceKind.JSON, json.dumps(scaled.tolist()))
    with TritonClient(url_for(extra_server, transport)) as client:
        spec = prepare(client, "digits_labelled")
        labels = read_labels(extra_server.repository, "digits_labelled", spec.output("probabilities"))
        plain = send(client, build_request(spec, {"features": source}))
        local = top_k(plain.output("probabilities"), 3, labels)
        remote = send(client, build_request(spec, {"features": source}, outputs=["probabilities"],
                                            class_count=3))
    by_triton = parse_classification(remote.output("probabilities"))
    expected = [DIGIT_NAMES[int(d)] for d in EXAMPLES["labels"][:2]]
    assert [row[0].label for row in local] == expected
    assert [[(c.index, c.label) for c in row] for row in by_triton] == [[(c.index, c.label) for c in row]
                                                                        for row in local]
    triton_scores = [c.score for row in by_triton for c in row]  # Triton prints 6 decimals
    assert triton_scores == pytest.approx([c.score for row in local for c in row], abs=1e-6)


# -- smoke -----------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_smoke_request_is_ok_on_the_samples(triton_server: TritonProcess, transport: str) -> None:
    with TritonClient(url_for(triton_server, transport)) as client:
        for model in ("digits_classifier", "digits_pipeline", "text_normalize"):
            outcome = smoke_request(client, model)
            assert outcome.ok and outcome.reason == "", outcome
            assert outcome.latency_ms is not None and outcome.latency_ms > 0


def test_smoke_request_fails_with_the_models_reason(extra_server: TritonProcess) -> None:
    with TritonClient(extra_server.http_url) as client:
        broken = smoke_request(client, "broken")
        missing = smoke_request(client, "not_there")
    assert not broken.ok and "broken on purpose: no weights" in broken.reason
    assert not missing.ok and "not_there" in missing.reason


# -- snippets executed ---------------------------------------------------------------------
@pytest.mark.parametrize("python", [False, True], ids=["curl", "python"])
@pytest.mark.parametrize(
    ("model", "options"),
    [
        ("digits_classifier", {"seed": 5}),
        ("digits_classifier", {"batch_size": 32}),  # large: the body goes to a file
        ("text_normalize", {"sources": {"TEXT": InputSource(SourceKind.TEXT, "Ünïcode   TEXT")}}),
        ("digits_pipeline", {"sources": {"IMAGE": InputSource(SourceKind.IMAGE, digit_png(3))},
                             "outputs": ["LABEL", "LABEL_NAME"]}),
    ],
    ids=["small", "large", "bytes", "image"],
)
def test_snippets_reproduce_the_request(
    triton_server: TritonProcess, tmp_path: Path, python: bool, model: str, options: dict[str, Any]
) -> None:
    options = dict(options)
    sources = options.pop("sources", {})
    with TritonClient(triton_server.http_url) as client:
        spec = prepare(client, model)
        request = build_request(spec, sources, **options)
        result = send(client, request)
    if python:
        snippet = python_snippet(triton_server.http_url, request)
    else:
        snippet = curl_command(triton_server.http_url, request,
                               output_types={o.name: o.datatype for o in spec.outputs})
    if options.get("batch_size") == 32:
        assert snippet.files, "a large request is written to a file"
    assert snippet_records(run_snippet(snippet, tmp_path, python), python) == records(result)


@pytest.mark.parametrize("odd_bytes", [False, True], ids=["text", "non-utf8"])
@pytest.mark.parametrize("python", [False, True], ids=["curl", "python"])
def test_snippets_reproduce_every_dtype(
    extra_server: TritonProcess, tmp_path: Path, python: bool, odd_bytes: bool
) -> None:
    """FP16/BF16 (and bytes JSON cannot hold) go as binary data with curl; Python over gRPC."""
    url = extra_server.http_url if not python else "grpc://" + extra_server.grpc_url
    sources = {}
    if odd_bytes:
        buffer = io.BytesIO()
        np.save(buffer, np.array([[b"\xffz", b"ok", b"\x00\x01y"]]))
        sources["IN_BYTES"] = InputSource(SourceKind.NPY, buffer.getvalue())
    with TritonClient(url) as client:
        spec = prepare(client, "all_types")
        request = build_request(spec, sources, seed=8)
        result = send(client, request)
    if odd_bytes:
        assert result.output("OUT_BYTES").data.tolist() == [[b"\xffz", b"ok", b"\x00\x01y"]]
    snippet = (python_snippet(url, request) if python else
               curl_command(url, request, output_types={o.name: o.datatype for o in spec.outputs}))
    assert snippet_records(run_snippet(snippet, tmp_path, python), python) == records(result)


# -- the CLI ---------------------------------------------------------------------------------
def test_cli_infers_an_image_and_prints_json(
    triton_server: TritonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = tmp_path / "seven.png"
    image.write_bytes(digit_png(7))
    code = main(["infer", "digits_pipeline", "--url", "grpc://" + triton_server.grpc_url,
                 "--input", f"IMAGE=@{image}", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    document = json.loads(out)
    assert document["protocol"] == "grpc" and document["server"]["requests"] == 1
    label = next(o for o in document["outputs"] if o["name"] == "LABEL")
    assert label["data"] == [int(EXAMPLES["labels"][7])]


def test_cli_text_output_with_top_k_labels_from_the_repository(
    extra_server: TritonProcess, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEADMIN_REPOSITORY", raising=False)
    code = main(["infer", "digits_labelled", "--url", extra_server.http_url, "--protocol", "http",
                 "--repository", str(extra_server.repository), "--top-k", "10", "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("digits_labelled (version 1) over http: ")
    assert "server: queue " in out and "probabilities  FP32 [1, 10]" in out
    ranked = [line.split()[2] for line in out.splitlines() if line.startswith("  ") and ". " in line[:6]]
    assert sorted(ranked) == sorted(DIGIT_NAMES)  # every class, each with its label


def test_cli_top_k_through_the_classification_extension_without_a_repository(
    extra_server: TritonProcess, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEADMIN_REPOSITORY", raising=False)
    code = main(["infer", "digits_labelled", "--url", extra_server.http_url, "--top-k", "2", "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    rows = document["top_k"]["probabilities"]
    assert len(rows) == 1 and len(rows[0]) == 2 and all(c["label"] in DIGIT_NAMES for c in rows[0])


def test_cli_errors_exit_non_zero_with_one_line(
    triton_server: TritonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((2, 3), dtype=np.int64))
    url = triton_server.http_url
    assert main(["infer", "digits_classifier", "--url", url, "--input", f"features=@{bad}"]) == 2
    err = capsys.readouterr().err
    assert err == "geadmin: error: input features expects FP32 [-1, 64]; got int64 [2, 3]\n"
    assert main(["infer", "no_such_model", "--url", triton_server.http_url]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["infer", "digits_classifier", "--url", "http://127.0.0.1:9"]) == 3
    err = capsys.readouterr().err
    assert "unreachable" in err and err.count("\n") == 1


@pytest.mark.parametrize("flag", ["--print-curl", "--print-python"])
def test_cli_snippets_run_as_printed(triton_server: TritonProcess, tmp_path: Path, flag: str) -> None:
    common = ["-m", "geadmin.cli.main", "infer", "digits_classifier", "--url", triton_server.http_url,
              "--seed", "4", "--batch-size", "2"]
    printed = subprocess.run([sys.executable, *common, flag], cwd=tmp_path, capture_output=True, text=True,
                             timeout=60)
    assert printed.returncode == 0, printed.stderr
    sent = subprocess.run([sys.executable, *common, "--json"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    expected = json.loads(sent.stdout)["outputs"]
    python = flag == "--print-python"
    got = snippet_records(run_snippet(Snippet(printed.stdout), tmp_path, python), python)
    assert got == expected
