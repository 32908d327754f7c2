"""Small helpers for tests that run geadmin as a subprocess."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (by parent links in /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()


class OutputCollector:
    """Reads a subprocess's stdout on a thread, so tests can wait for a line (bounded)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        self.process = process
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._pump, args=(process.stdout,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, marker: str, timeout_s: float) -> str:
        if wait_for(lambda: marker in self.text or self.process.poll() is not None, timeout_s):
            self._thread.join(timeout=1) if self.process.poll() is not None else None
            if marker in self.text:
                return self.text
        raise AssertionError(f"{marker!r} not printed within {timeout_s}s; output so far:\n{self.text}")


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


def send_digits(grpc_url: str, count: int) -> int:
    """`count` one-row requests to the sample `digits_classifier`, 4 at a time, each answer
    checked for its 10 probabilities; returns `count` (how many were answered)."""
    import numpy as np  # here: most helpers' users need neither
    import tritonclient.grpc as grpcclient

    def one(i: int) -> None:
        client = grpcclient.InferenceServerClient(grpc_url)
        x = grpcclient.InferInput("features", [1, 64], "FP32")
        x.set_data_from_numpy(np.full((1, 64), i % 16, dtype=np.float32))
        result = client.infer("digits_classifier", [x], client_timeout=30)
        assert result.as_numpy("probabilities").shape == (1, 10)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, range(count)))
    return count
