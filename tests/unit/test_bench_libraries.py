"""perf_analyzer's libraries in a dashboard process: Streamlit inserts its script's path at
sys.path[0] for every script run and removes it when the run ends. A load test runs in a
thread of its own, so its search for the nvidia-pytriton wheel can overlap that removal;
importlib walks the live sys.path, and the removal made it skip the entry after the one it
was reading. The first run of a fresh process is the slow one (no finder cached), so the
first load test from the page failed with "libb64.so.0d: cannot open shared object file".

The test makes the overlap happen at a known moment: a finder placed just before
site-packages runs Streamlit's own `modified_sys_path.__exit__` when the search reaches it.
With the old search (importlib.util.find_spec on the live sys.path) site-packages is skipped
and library_dir finds nothing; the real perf_analyzer then cannot start.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.runtime.scriptrunner.exec_code import modified_sys_path

from geadmin.binaries import wheel_layout
from geadmin.ops.bench.failures import describe_library_search
from geadmin.ops.bench.load_test import find_perf_analyzer, library_dir

RACE_ENTRY = "/geadmin-test/streamlit-script-run-ends-here"


class _ScriptRunEnds:
    """A path-entry finder whose lookup is the moment Streamlit's script run ends."""

    def __init__(self, context: modified_sys_path) -> None:
        self.context = context
        self.fired = False

    def find_spec(self, fullname: str, target: object = None) -> None:
        if not self.fired:
            self.fired = True
            self.context.__exit__(None, None, None)  # Streamlit removes its sys.path[0] entry
        return None

    def invalidate_caches(self) -> None:
        pass


@pytest.fixture
def script_run_ending_mid_search(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _ScriptRunEnds:
    site = next(entry for entry in sys.path if entry and (Path(entry) / "pytriton").is_dir())
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "pytriton", raising=False)  # a fresh process: not imported yet
    sys.path.insert(sys.path.index(site), RACE_ENTRY)
    context = modified_sys_path(str(tmp_path / "app.py"))
    context.__enter__()  # a script run is going on: its path is sys.path[0]
    finder = _ScriptRunEnds(context)
    monkeypatch.setitem(sys.path_importer_cache, RACE_ENTRY, finder)
    return finder


def test_wheel_found_when_a_streamlit_script_run_ends_during_the_search(script_run_ending_mid_search):
    layout = wheel_layout()
    assert script_run_ending_mid_search.fired, "the search never reached the planted entry"
    assert layout is not None and layout.libs_dir.is_dir()


def test_perf_analyzer_starts_with_the_links_made_while_a_script_run_ends(script_run_ending_mid_search,
                                                                           tmp_path):
    libs = library_dir(tmp_path)
    assert script_run_ending_mid_search.fired
    assert libs is not None and (libs / "libb64.so.0d").resolve().is_file()
    done = subprocess.run([str(find_perf_analyzer()), "--version"], capture_output=True, text=True,
                          env={"LD_LIBRARY_PATH": str(libs), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert "error while loading shared libraries" not in done.stderr, done.stderr
    assert "Perf Analyzer Version" in done.stdout + done.stderr


def test_perf_analyzer_without_the_links_cannot_start():
    """The other side: the failure the links prevent is real (this binary needs them)."""
    done = subprocess.run([str(find_perf_analyzer()), "--version"], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert "libb64.so.0d: cannot open shared object file" in done.stderr


def test_library_advice_names_the_directory_searched_and_what_it_holds(tmp_path):
    empty = tmp_path / "lib"
    empty.mkdir()
    (empty / "libb64.so.0d").symlink_to(tmp_path / "gone" / "libb64-1234.so.0d")
    text = describe_library_search(str(empty), "libb64.so.0d: cannot open shared object file")
    assert str(empty) in text and "broken link" in text and "gone" in text
    layout = wheel_layout()
    assert layout is not None
    assert str(layout.libs_dir) in text and "libb64-" in text  # where the wheel's copy is
    none = describe_library_search("", "libb64.so.0d: cannot open shared object file")
    assert "no LD_LIBRARY_PATH" in none
