"""The ONNX interface reader (backend_src/src/onnx_info.cc, a hand-written protobuf wire
reader kept on purpose: backend_src/README.md says why) fuzzed with libFuzzer under
AddressSanitizer and UndefinedBehaviorSanitizer, from a seed corpus of ONNX files written by
onnx's own serializer (tests/backend/fuzz/corpus, made by make_seeds.py). A bounded run: any
crash, sanitizer report or leak fails the test with the reproducer libFuzzer wrote."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.npu_ge import REPO_ROOT, build_backend

pytestmark = pytest.mark.integration

FUZZ = REPO_ROOT / "tests" / "backend" / "fuzz"
BINARY = REPO_ROOT / "build" / "fuzz" / "onnx_info_fuzzer"
SEEDS = sorted((FUZZ / "corpus").glob("*.onnx"))


@pytest.fixture(scope="module")
def fuzzer() -> Path:
    build_backend()  # fetches the CANN headers the reader's includes need
    done = subprocess.run(["bash", str(FUZZ / "build.sh")], capture_output=True, text=True,
                          timeout=540, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return BINARY


def test_seed_corpus_is_real_onnx_files_the_reader_accepts(fuzzer: Path) -> None:
    assert len(SEEDS) >= 8
    for seed in SEEDS:
        assert seed.read_bytes()[:1] == b"\x08", seed  # ModelProto.ir_version, as onnx writes it first
    # each seed once through the target (ASan/UBSan armed): none crashes
    done = subprocess.run([str(fuzzer), *map(str, SEEDS)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stderr.count("Executed ") == len(SEEDS), done.stderr[-2000:]


def test_a_bounded_fuzz_run_finds_no_crash_leak_or_undefined_behaviour(fuzzer: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(FUZZ / "corpus", corpus)  # the run adds inputs: never to the repository
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    done = subprocess.run(
        [str(fuzzer), str(corpus), "-max_total_time=25", "-rss_limit_mb=1024", "-timeout=10",
         "-print_final_stats=1", f"-artifact_prefix={artifacts}/"],
        capture_output=True, text=True, timeout=300, check=False)
    found = sorted(p.name for p in artifacts.iterdir())
    assert done.returncode == 0 and not found, f"{found}\n{done.stderr[-6000:]}"
    runs = int(next(line.split()[-1] for line in done.stderr.splitlines()
                    if line.startswith("stat::number_of_executed_units:")))
    assert runs > 1000, done.stderr[-2000:]  # it really ran
