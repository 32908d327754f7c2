"""The packaged sample repository in tests: its model names, private copies, extra python
models for failure cases, and requests to the sample models."""

from __future__ import annotations

import io
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import SAMPLE_REPOSITORY
from geadmin.telemetry.history import store as history
from tests.support.processes import quick_stopping_triton, wait_for

if TYPE_CHECKING:
    from geadmin.stack.tritonserver import TritonProcess

SAMPLE_MODELS = [
    "digits_classifier",
    "digits_pipeline",
    "digits_postprocess",
    "digits_preprocess",
    "text_normalize",
]
EXAMPLES = np.load(SAMPLE_REPOSITORY.parent / "digits_examples.npz")
DIGIT_NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
LOAD_MODEL = "digits_classifier"  # the model small_load sends to


def copy_samples(dest: Path) -> Path:
    shutil.copytree(SAMPLE_REPOSITORY, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def digit_png(index: int, scale: int = 4) -> bytes:
    """The sample image of a digit, enlarged (geadmin resizes it back to the input's 8x8)."""
    from PIL import Image  # here: only the image tests need it

    image = Image.fromarray(EXAMPLES["images"][index], "L").resize((8 * scale, 8 * scale), Image.NEAREST)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def add_python_model(repository: Path, name: str, initialize: str = "pass", *,
                     header: str = 'backend: "python"') -> Path:
    """A one-input python model whose `initialize` body is `initialize` (for failure cases)."""
    model = repository / name
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        f'name: "{name}"\n{header}\nmax_batch_size: 0\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\n'
    )
    body = "\n".join(f"        {line}" for line in initialize.splitlines())
    (model / "1" / "model.py").write_text(
        "import time\nfrom pathlib import Path\n\n\nclass TritonPythonModel:\n"
        f"    def initialize(self, args):\n{body}\n"
    )
    return model


# initialize sleeps as long as the config's parameter init_s says (0 without it)
SLOW_INITIALIZE = ("import json\nparameters = json.loads(args['model_config']).get('parameters', {})\n"
                   "time.sleep(float(parameters.get('init_s', {}).get('string_value', '0')))")


def add_slow_start_model(repository: Path, name: str) -> Path:
    """A python model whose load takes as long as its config's parameter init_s says: a
    change that adds `slow_start_parameter(S)` loads for S seconds beside the version serving."""
    return add_python_model(repository, name, SLOW_INITIALIZE)


def slow_start_parameter(seconds: float) -> bytes:
    return f'parameters [{{ key: "init_s" value: {{ string_value: "{seconds:g}" }} }}]\n'.encode()


ANSWERING_EXECUTE = """
    def execute(self, requests):
        import triton_python_backend_utils as pb_utils
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x * 2)]))
        return responses
"""


def failing_execute(message: str) -> str:
    return f"""
    def execute(self, requests):
        import triton_python_backend_utils as pb_utils
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError({message!r})) for _ in requests]
"""


def add_answering_model(repository: Path, name: str, *, fails_with: str = "") -> Path:
    """A one-input python model that loads READY and answers y = 2x — or, with `fails_with`,
    answers every request with that error (READY but not answering)."""
    model = add_python_model(repository, name)
    set_answers(model, fails_with=fails_with)
    return model


def add_hung_model(repository: Path, name: str) -> Path:
    """A python model that loads READY and whose execute never returns (an hour's sleep): every
    request to it waits in Triton, whatever the client's timeout."""
    model = add_python_model(repository, name)
    source = model / "1" / "model.py"
    source.write_text(source.read_text() + "\n    def execute(self, requests):\n        time.sleep(3600)\n")
    return model


def set_answers(model: Path, *, fails_with: str = "") -> None:
    """Rewrite the model's execute: answering, or failing with `fails_with` (reload to apply)."""
    source = model / "1" / "model.py"
    head = source.read_text().split("\n    def execute", 1)[0]
    execute = failing_execute(fails_with) if fails_with else ANSWERING_EXECUTE
    source.write_text(head.rstrip("\n") + "\n" + execute)


def send_digits(grpc_url: str, count: int) -> int:
    """`count` one-row requests to the sample `digits_classifier`, 4 at a time, each answer
    checked for its 10 probabilities; returns `count` (how many were answered)."""
    import tritonclient.grpc as grpcclient  # here: most users of this module need no client

    def one(i: int) -> None:
        client = grpcclient.InferenceServerClient(grpc_url)
        x = grpcclient.InferInput("features", [1, 64], "FP32")
        x.set_data_from_numpy(np.full((1, 64), i % 16, dtype=np.float32))
        result = client.infer("digits_classifier", [x], client_timeout=30)
        assert result.as_numpy("probabilities").shape == (1, 10)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, range(count)))
    return count


@contextmanager
def small_load(server: TritonProcess, workers: int = 2, *, model: str = LOAD_MODEL,
               input_name: str = "features", shape: tuple[int, ...] = (1, 64)) -> Iterator[list[int]]:
    """Requests to `model` (an FP32 input of `shape`) from `workers` threads until the block
    ends; yields the sent counts."""
    import tritonclient.grpc as grpcclient

    stop = threading.Event()
    sent = [0] * workers

    def work(i: int) -> None:
        client = grpcclient.InferenceServerClient(server.grpc_url)  # one per thread
        x = grpcclient.InferInput(input_name, list(shape), "FP32")
        x.set_data_from_numpy(np.ones(shape, dtype=np.float32))
        while not stop.is_set():
            client.infer(model, [x], client_timeout=30)
            sent[i] += 1

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    assert wait_for(lambda: sum(sent) > 0, 30), "the load never got an answer"
    try:
        yield sent
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)


def busy_points(server: TritonProcess, home: Path) -> int:
    """History points of the last 10 s in which LOAD_MODEL had traffic (sampler in `home`)."""
    found = history.model_series(server.metrics_url, history.window_since(10), models=[LOAD_MODEL], home=home)
    return sum(1 for r in found[0].column("inferences_per_s") if r) if found else 0


def load_until(server: TritonProcess, home: Path, points: int, timeout_s: float = 30) -> None:
    """Requests to LOAD_MODEL until the sampler in `home` recorded `points` busy points."""
    deadline = time.monotonic() + timeout_s
    while busy_points(server, home) < points and time.monotonic() < deadline:
        send_digits(server.grpc_url, 40)
    assert busy_points(server, home) >= points


def samples_triton(root: Path, **kwargs: object) -> Iterator[TritonProcess]:
    """A fixture's body: a real Triton on a copy of the sample repository under `root`, started,
    handed over, stopped at the end (`models=[...]` loads only those)."""
    triton = quick_stopping_triton(copy_samples(root / "model_repository"),
                                   log_path=root / "tritonserver.log", **kwargs)
    triton.start()
    try:
        yield triton
    finally:
        triton.stop()
