"""A Ctrl-C while the command is still starting (importing its modules) ends it quietly with
130, as one during the command does: it printed Python's traceback."""

from __future__ import annotations

import signal
import subprocess
import time

from tests.support.stack import GEADMIN


def test_a_ctrl_c_during_start_up_prints_no_traceback() -> None:
    for delay_s in (0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6):
        process = subprocess.Popen([*GEADMIN, "status", "--url", "http://127.0.0.1:1"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay_s)  # a moment inside the imports: the event under test, nothing to wait on
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        assert "Traceback" not in err, (delay_s, err)
        # 130: ours; -SIGINT: the interpreter had not installed its handler yet (no traceback either);
        # 3: done before the Ctrl-C (nothing answers there); never a crash (a Ctrl-C inside a C
        # extension's import had ended in SIGSEGV)
        assert process.returncode in (130, -signal.SIGINT, 3), (delay_s, process.returncode, err)
