"""Every input a user can hand geadmin is bounded before it costs memory or time: image
pixel counts from the header, JSON nesting, label files inside the model directory, load-test
loads, windows and trials, and one load test per server at a time."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from geadmin.errors import (
    BenchBusyError,
    BenchSettingsError,
    InferInputError,
    InputTooLargeError,
    RepositoryError,
)
from geadmin.ops.bench.load_test import BenchSettings, load_test, parse_loads
from geadmin.ops.bench.params import MAX_CONCURRENCY, MAX_LOADS, lock_path, server_lock
from geadmin.ops.bench.results import CONCURRENCY, REQUEST_RATE, list_runs
from geadmin.ops.infer.images import image_size, image_tensor
from geadmin.ops.infer.inputs import json_tensor, npy_tensor
from geadmin.ops.infer.outputs import read_labels
from geadmin.ops.infer.spec import MAX_IMAGE_PIXELS, MAX_JSON_DEPTH, InputSpec, OutputSpec, json_depth
from geadmin.repository.triton_rules import label_path
from geadmin.triton.client import TritonClient
from tests.support.auth import admin_auth

IMAGE = InputSpec("image", "FP32", (3, 224, 224), True)
VECTOR = InputSpec("x", "FP32", (-1,), False)


# -- images --------------------------------------------------------------------------------
def bomb_png(side: int = 12000) -> bytes:
    """A few hundred KB of PNG that decodes to side x side pixels."""
    buffer = io.BytesIO()
    Image.new("L", (side, side)).save(buffer, "PNG", optimize=True)
    return buffer.getvalue()


def test_an_image_over_the_pixel_limit_is_refused_from_its_header_without_decoding(tmp_path: Path) -> None:
    data = bomb_png()
    assert len(data) < 1_000_000 and image_size(data) == (12000, 12000)
    (tmp_path / "bomb.png").write_bytes(data)
    # A fresh interpreter: its peak memory shows whether the 144-megapixel image was decoded
    # (converting it to RGB floats would take gigabytes).
    script = f"""
import resource, sys
from pathlib import Path
from geadmin.errors import InputTooLargeError
from geadmin.ops.infer.images import image_tensor
from geadmin.ops.infer.spec import InputSpec
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    data = Path({str(tmp_path / "bomb.png")!r}).read_bytes()
    image_tensor(InputSpec("image", "FP32", (3, 224, 224), True), data)
except InputTooLargeError as exc:
    print(exc)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    sys.exit(0)
sys.exit("decoded")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    message, grown_kib = done.stdout.strip().splitlines()
    assert "12000 x 12000 pixels" in message and f"{MAX_IMAGE_PIXELS / 1e6:g} million" in message
    assert int(grown_kib) < 50_000, f"the check cost {int(grown_kib) // 1024} MiB: it decoded the image"


def test_an_image_at_the_limit_still_works() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 20, 30)).save(buffer, "PNG")
    tensor = image_tensor(IMAGE, buffer.getvalue())
    assert tensor.shape == (1, 3, 224, 224) and tensor[0, 0, 0, 0] == 10.0


def test_a_truncated_image_is_an_input_error_not_a_crash() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48)).save(buffer, "PNG")
    with pytest.raises(InferInputError, match="not an image Pillow can read"):
        image_tensor(IMAGE, buffer.getvalue()[:60])


# -- JSON ----------------------------------------------------------------------------------
def test_deeply_nested_json_is_refused_before_parsing() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # json.loads alone raises RecursionError on this
    with pytest.raises(RecursionError):
        json.loads(deep)
    with pytest.raises(InferInputError, match=f"nested 100000 levels deep; the limit is {MAX_JSON_DEPTH}"):
        json_tensor(VECTOR, deep)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    assert json_depth('{"data": ["[[[[", "]\\"[["], "shape": [2]}') == 2
    assert json_depth("[[1, 2], [3, 4]]") == 2 and json_depth("7") == 0


def test_a_tensor_of_ordinary_depth_still_parses() -> None:
    nested = json.dumps(np.zeros((1,) * 8).tolist())
    assert json_tensor(InputSpec("x", "FP32", (-1,) * 8, False), nested).shape == (1,) * 8


# -- label files ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../secret.txt", "../../etc/passwd", "/etc/passwd", "sub/../../x"])
def test_a_label_file_outside_the_model_directory_is_never_read(tmp_path: Path, name: str) -> None:
    (tmp_path / "repo" / "m").mkdir(parents=True)
    (tmp_path / "repo" / "secret.txt").write_text("password\n")
    with pytest.raises(RepositoryError, match="model directory"):
        read_labels(tmp_path / "repo", "m", OutputSpec("scores", "FP32", (2,), name))


def test_a_label_file_linked_out_of_the_model_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "repo" / "m").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("password\n")
    (tmp_path / "repo" / "m" / "labels.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(RepositoryError, match="leads out of the model directory"):
        read_labels(tmp_path / "repo", "m", OutputSpec("scores", "FP32", (2,), "labels.txt"))


def test_a_label_file_inside_is_read(tmp_path: Path) -> None:
    (tmp_path / "repo" / "m" / "sub").mkdir(parents=True)
    (tmp_path / "repo" / "m" / "sub" / "labels.txt").write_text("cat\ndog\n")
    labels = read_labels(tmp_path / "repo", "m", OutputSpec("s", "FP32", (2,), "sub/labels.txt"))
    assert labels == ["cat", "dog"]
    assert label_path(tmp_path / "repo" / "m", "sub/labels.txt").name == "labels.txt"


# -- load tests ----------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "mode", "match"), [
    ("0", CONCURRENCY, "above 0"),
    (",", CONCURRENCY, "one or more loads"),
    ("", CONCURRENCY, "one or more loads"),
    ("1.5", CONCURRENCY, "whole numbers"),
    ("1,x", CONCURRENCY, "'x' is not a number"),
    ("nan", CONCURRENCY, "above 0"),
    ("inf", REQUEST_RATE, "above 0"),
    ("-5", REQUEST_RATE, "above 0"),
    (str(MAX_CONCURRENCY + 1), CONCURRENCY, f"up to {MAX_CONCURRENCY}"),
    ("1e9", REQUEST_RATE, "up to"),
    (",".join(["1"] * (MAX_LOADS + 1)), CONCURRENCY, f"the limit is {MAX_LOADS}"),
])
def test_malformed_or_unbounded_loads_are_refused_with_the_reason(text: str, mode: str, match: str) -> None:
    with pytest.raises(BenchSettingsError, match=match):
        parse_loads(text, mode)


def test_loads_parse_for_both_modes() -> None:
    assert parse_loads(" 1, 4 ,16,", CONCURRENCY) == (1.0, 4.0, 16.0)
    assert parse_loads("0.5,2.5", REQUEST_RATE) == (0.5, 2.5)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"measurement_interval_ms": 10}, "measurement window"),
    ({"measurement_interval_ms": 10_000_000}, "measurement window"),
    ({"max_trials": 100_000}, "trials"),
    ({"measurement_request_count": 10**9}, "requests per window"),
    ({"stability_percentage": float("nan")}, "stability"),
    ({"loads": tuple(float(n) for n in range(1, 31)), "max_trials": 100, "measurement_interval_ms": 60_000},
     "the limit is 60 min"),
])
def test_windows_and_trials_are_bounded(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(BenchSettingsError, match=match):
        BenchSettings("m", "http://127.0.0.1:8000", **kwargs)  # type: ignore[arg-type]


def test_one_load_test_per_server_at_a_time(tmp_path: Path) -> None:
    client = TritonClient("http://127.0.0.1:9")  # never asked: the lock refuses first
    settings = BenchSettings("m", "grpc://127.0.0.1:9")
    with server_lock(tmp_path, client.url, "other"):
        with pytest.raises(BenchBusyError, match=r"another load test runs against .*other, pid"):
            load_test(client, settings, home=tmp_path, auth=admin_auth())
        other_server = TritonClient("http://127.0.0.1:10")
        with server_lock(tmp_path, other_server.url):  # another server is free
            pass
    assert list_runs(tmp_path) == []
    with server_lock(tmp_path, client.url):  # released when the holder ends
        pass


def test_the_lock_holds_across_threads_and_processes(tmp_path: Path) -> None:
    url = "http://127.0.0.1:8000"
    refused: list[BaseException] = []

    def second() -> None:
        try:
            with server_lock(tmp_path, url):
                pass
        except BenchBusyError as exc:
            refused.append(exc)

    with server_lock(tmp_path, url, "first"):
        thread = threading.Thread(target=second)
        thread.start()
        thread.join()
        script = ("import sys; from pathlib import Path; from geadmin.errors import BenchBusyError\n"
                  "from geadmin.ops.bench.params import server_lock\n"
                  f"try:\n    server_lock({str(tmp_path)!r}, {url!r}).__enter__()\n"
                  "except BenchBusyError:\n    sys.exit(3)\n")
        script = script.replace(f"server_lock({str(tmp_path)!r}", f"server_lock(Path({str(tmp_path)!r})")
        done = subprocess.run([sys.executable, "-c", script], timeout=60,
                              cwd=Path(__file__).resolve().parents[2])
    assert len(refused) == 1 and done.returncode == 3
    assert lock_path(tmp_path, url) == lock_path(tmp_path, "HTTP://127.0.0.1:8000")
    assert oct(os.stat(lock_path(tmp_path, url)).st_mode & 0o777) == "0o600"


# -- .npy ----------------------------------------------------------------------------------
def test_an_npy_header_declaring_a_huge_array_is_refused_before_numpy_allocates() -> None:
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }"
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    data = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\x00" * 16
    with pytest.raises(InputTooLargeError, match=r"shape \[1000000000000\]"):
        npy_tensor(VECTOR, data)


def test_an_npy_shorter_than_its_header_says_is_refused() -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(1000, np.float32))
    with pytest.raises(InferInputError, match=r"declares .* but the file holds"):
        npy_tensor(VECTOR, buffer.getvalue()[:200])


@pytest.mark.parametrize("loads", ["0", ",", "1.5"])
def test_geadmin_bench_refuses_bad_concurrencies_as_a_usage_error(loads: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from geadmin.cli.main import main

    assert main(["bench", "m", "--concurrency", loads, "--url", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("geadmin: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_a_run_over_grpc_is_blocked_by_a_run_over_http_of_the_same_server(tmp_path: Path) -> None:
    """The page measures over gRPC with the server's HTTP client: both addresses are held."""
    http, grpc = "http://127.0.0.1:9", "grpc://127.0.0.1:10"
    with server_lock(tmp_path, grpc, "a gRPC run"), pytest.raises(BenchBusyError, match="a gRPC run"):
        load_test(TritonClient(http), BenchSettings("m", grpc), home=tmp_path, auth=admin_auth())
