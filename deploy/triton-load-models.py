"""Load the repository's models into this container's Triton once it is live.

Run by triton-entrypoint.sh in the background when TRITON_LOAD_MODELS is set ("*" for
every model of the repository, or "a,b,c"). The server itself starts with no model
(`--model-control-mode=explicit` and no `--load-model`): a model that hangs while loading
at start would keep Triton's endpoints closed for good (FACTS.md), so loads go through the
repository API instead, all at once, each with its own timeout, and one line per model
reports the outcome in `docker logs`. A model that times out keeps loading inside Triton;
the others are not delayed by it.

Standard library only: the triton image has no geadmin. When geadmin's own start-up
loader can run against a remote Triton, the dashboard container may take this job over;
this script then goes (it must not grow into a second implementation).

geadmin's tuning trials are never loaded: a directory holding the marker `.geadmin-trial.json`
(a trial copy `geadmin tune` made, or one a killed run left) is skipped, whatever its name, in
every repository named (`--repository`, or TRITON_MODEL_REPOSITORIES: ':'-separated, which the
entry point fills from Triton's `--model-repository` flags). A replica sharing the volume would
otherwise load the trial into its NPU memory.

A model whose load kills Triton (a backend that crashes on its file) must not make a crash
loop of the container's restarts. The loader keeps a state file across them (TRITON_LOAD_STATE):
the loads in flight are written before they are sent, so the loads a dying Triton cut off are
known at the next start. Those load one at a time, after the others; one that Triton exits under
again, alone, is left out of every start, said in one line, until its files change (a fix
retries it) or the state file is removed. A load still running when its wait ends stays in
flight until Triton settles it, and a suspect counts as alone only when nothing else loads. A
stop on request (`docker stop`, a restart: Triton logs "Signal (15) received." in the log it
appends to, TRITON_LOG_FILE) blames no model. geadmin's own `geadmin up` does the same
(geadmin.stack.startup_loads).

Environment: TRITON_LOAD_MODELS, TRITON_ADMIN_KEY (the restricted API's key, sent as the
`admin-key` header), TRITON_LOAD_TIMEOUT (seconds per model, default 300),
TRITON_LIVE_TIMEOUT (seconds to wait for the server, default 600), TRITON_LOG_FILE (Triton's
--log-file, which the entry point passes on), TRITON_LOAD_STATE (default
/var/tmp/geadmin-load-models.json: the container's own layer, kept across its restarts; under
Kubernetes, where a restarted container is a new one, a file on the pod's emptyDir).
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed

PREFIX = "load-models:"
TRIAL_MARKER = ".geadmin-trial.json"  # geadmin.repository.trials.MARKER
DEFAULT_STATE = "/var/tmp/geadmin-load-models.json"
SETTLE_LIMIT_S = 3600.0  # how long the loader watches loads past its own timeout before it ends
LOG_READ_LIMIT = 8 << 20  # of Triton's log after the loads were sent: its stop is at the end


def say(text: str) -> None:
    print(f"{PREFIX} {text}", flush=True)


def call(url: str, body: dict | None, key: str | None, timeout_s: float) -> bytes:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("admin-key", key)
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return response.read()


def error_text(exc: Exception) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        try:
            return f"HTTP {exc.code}: {json.loads(exc.read()).get('error', '')}"
        except (ValueError, OSError):
            return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"cannot reach Triton: {exc.reason}"
    return str(exc) or type(exc).__name__


def wait_live(base: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            call(f"{base}/v2/health/live", None, None, 3)
            return True
        except (OSError, ValueError):
            time.sleep(1)
    return False


def load(base: str, name: str, key: str | None, timeout_s: float) -> tuple[bool, str, bool]:
    """(loaded, what happened, settled): not settled when Triton may still be loading it (our
    wait ran out, or the connection broke with Triton's end): it stays in flight (load_all)."""
    started = time.monotonic()
    try:
        call(f"{base}/v2/repository/models/{name}/load", {}, key, timeout_s)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            return False, f"still loading after {timeout_s:.0f}s (Triton keeps trying)", False
        broken = isinstance(reason, (ConnectionError, http.client.HTTPException))
        return False, error_text(exc), not broken
    return True, f"loaded in {time.monotonic() - started:.1f}s", True


def still_loading(base: str, key: str | None, names: list[str], bound_s: float) -> list[str]:
    """Which of `names` Triton is still loading after waiting (polling its index) up to `bound_s`;
    all of them when Triton does not answer (it may be going down: they stay in flight)."""
    deadline = time.monotonic() + bound_s
    while names:
        try:
            index = json.loads(call(f"{base}/v2/repository/index", {}, key, 10))
        except (OSError, ValueError, http.client.HTTPException):
            return names
        names = [n for n in names if any(e.get("name") == n and e.get("state") == "LOADING" for e in index)]
        if not names or time.monotonic() >= deadline:
            return names
        time.sleep(2)
    return names


class State:
    """What the loader knows across the container's restarts: the loads in flight (and whether
    that was one suspect alone), the suspects, and the models left out with why and their files'
    fingerprint. Written whole and atomically; one that cannot be read or written is said once
    and the loader goes on without it (a read-only layer must not stop the loads)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.in_flight: list[str] = []
        self.alone = False
        self.suspects: list[str] = []
        self.left_out: dict[str, dict[str, str]] = {}
        self.log_at = -1  # Triton's log size when the loads in flight were sent; -1: unknown
        self._writable = True
        try:
            with open(path, encoding="utf-8") as file:
                saved = json.load(file)
            # All or nothing: a file half of which reads must not leave half a state.
            in_flight = [str(n) for n in saved.get("in_flight", [])]
            alone, log_at = bool(saved.get("alone", False)), int(saved.get("log_at", -1))
            suspects = [str(n) for n in saved.get("suspects", [])]
            left_out = {str(n): {"why": str(e.get("why", "")), "files": str(e.get("files", ""))}
                        for n, e in dict(saved.get("left_out", {})).items()}
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError, AttributeError, RecursionError) as exc:
            say(f"cannot read the state file {path} ({exc}): starting without it")
            return
        self.in_flight, self.alone, self.log_at = in_flight, alone, log_at
        self.suspects, self.left_out = suspects, left_out

    def flying(self, names: list[str], *, alone: bool = False, log: str = "") -> None:
        self.in_flight, self.alone = list(names), alone
        try:
            self.log_at = os.path.getsize(log) if log and names else -1
        except OSError:
            self.log_at = -1
        self.write()

    def landed(self, name: str) -> None:
        self.in_flight = [n for n in self.in_flight if n != name]
        self.suspects = [n for n in self.suspects if n != name]
        self.write()

    def write(self) -> None:
        if not self._writable:
            return
        saved = {"in_flight": self.in_flight, "alone": self.alone, "log_at": self.log_at,
                 "suspects": self.suspects, "left_out": self.left_out}
        partial = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            if os.path.lexists(partial):  # a killed start's (a container reuses its pids)
                os.unlink(partial)
            # Never through a link someone left at the name (the default lives in /var/tmp).
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with open(fd, "w", encoding="utf-8") as file:
                json.dump(saved, file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(partial, self.path)
        except OSError as exc:
            self._writable = False
            say(f"cannot write the state file {self.path} ({exc}): a model whose load kills Triton "
                "is not remembered across restarts (set TRITON_LOAD_STATE to a writable path)")


def files_of(name: str, repositories: list[str]) -> str:
    """A fingerprint of the model's files (path, size, modification time) in every repository
    named: a left-out model whose files changed is tried again."""
    digest = hashlib.sha256()
    for repository in repositories:
        top = os.path.join(repository, name)
        for folder, dirs, files in sorted(os.walk(top)):
            dirs.sort()
            for file in sorted(files):
                path = os.path.join(folder, file)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                digest.update(f"{os.path.relpath(path, top)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def stopped_on_request(log: str, since: int) -> bool:
    """Whether Triton's log says, after byte `since`, that it was stopped by SIGTERM or SIGINT
    (`docker stop`, a restart, Ctrl-C): Triton appends to its log and writes "Signal (15)
    received." when asked to stop; a crash writes another signal or, killed, nothing."""
    if not log or since < 0:
        return False
    try:
        with open(log, "rb") as file:
            size = file.seek(0, os.SEEK_END)
            if size < since:  # rotated or truncated: nothing to go by
                return False
            file.seek(max(since, size - LOG_READ_LIMIT))
            tail = file.read(LOG_READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return False
    return re.search(r"Signal \((2|15)\) received", tail) is not None


def after_restart(state: State, repositories: list[str], log: str) -> None:
    """Judge the loads the last start left in flight, and retry left-out models whose files changed."""
    cut = state.in_flight
    if cut and stopped_on_request(log, state.log_at):
        say(f"Triton was stopped on request (its log says so) while {', '.join(cut)} loaded: loading them "
            "as usual")
    elif cut and state.alone and len(cut) == 1:
        leave_out(state, cut[0], repositories)
    elif cut:
        state.suspects = sorted(set(state.suspects) | set(cut))
        say(f"Triton stopped while {', '.join(cut)} loaded (a load may have killed it): they load one at a "
            "time, after the others")
    state.in_flight, state.alone = [], False
    for name, entry in list(state.left_out.items()):
        if entry["files"] != files_of(name, repositories):
            del state.left_out[name]
            state.suspects = sorted({*state.suspects, name})
            say(f"{name}: its files changed since it was left out: loading it again, alone")
    state.write()


def leave_out(state: State, name: str, repositories: list[str]) -> None:
    why = "Triton exited while it loaded, twice (the second time alone)"
    state.left_out[name] = {"why": why, "files": files_of(name, repositories)}
    state.suspects = [n for n in state.suspects if n != name]


def hidden(name: str) -> bool:
    """A hidden directory (`.git`, `.geadmin-staging-x`): never a model to load."""
    return name.startswith(".")


def trial(name: str, repositories: list[str]) -> bool:
    """A geadmin tuning trial: its directory holds the trial marker in one of the repositories."""
    return any(os.path.lexists(os.path.join(repository, name, TRIAL_MARKER)) for repository in repositories)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--repository", action="append", default=[],
                        help="a model repository Triton serves (repeatable): its trial copies are skipped")
    args = parser.parse_args(argv)
    named = os.environ.get("TRITON_MODEL_REPOSITORIES", "")
    repositories = args.repository + [path for path in named.split(":") if path]
    wanted = os.environ.get("TRITON_LOAD_MODELS", "").strip()
    key = os.environ.get("TRITON_ADMIN_KEY") or None
    load_timeout_s = float(os.environ.get("TRITON_LOAD_TIMEOUT", "300"))
    live_timeout_s = float(os.environ.get("TRITON_LIVE_TIMEOUT", "600"))
    if not wanted:
        return 0
    log = os.environ.get("TRITON_LOG_FILE", "")
    state = State(os.environ.get("TRITON_LOAD_STATE") or DEFAULT_STATE)
    after_restart(state, repositories, log)
    if not wait_live(args.url, live_timeout_s):
        say(f"Triton at {args.url} was not live after {live_timeout_s:.0f}s: no model loaded")
        return 1
    try:
        index = json.loads(call(f"{args.url}/v2/repository/index", {}, key, 30))
    except (OSError, ValueError) as exc:
        say(f"cannot list the model repository: {error_text(exc)}")
        return 1
    # Triton indexes every directory of the repository, hidden ones too (a `.git`, geadmin's
    # `.geadmin-staging-*` of a create in progress or cut short): never load those.
    present = {entry["name"]: entry.get("state", "") for entry in index if not hidden(entry["name"])}
    names = sorted(present) if wanted == "*" else [n.strip() for n in wanted.split(",") if n.strip()]
    skipped = [name for name in names if trial(name, repositories)]
    for name in skipped:
        say(f"{name}: skipped: a geadmin tuning trial ({TRIAL_MARKER}), never loaded at start")
    names = [name for name in names if name not in skipped]
    for name in names:
        if name not in present:
            say(f"{name}: FAILED: no such model in the repository")
    left_out = [name for name in names if name in state.left_out]
    for name in left_out:
        say(f"{name}: FAILED: {state.left_out[name]['why']}: left out of every start until its files "
            f"change — fix it (a change to its files retries it at the next start), or load it by hand "
            f"to try it now")
    todo = [name for name in names if name in present and present[name] != "READY"
            and name not in state.left_out]
    together = [name for name in todo if name not in state.suspects]
    one_by_one = [name for name in todo if name in state.suspects]
    say(f"loading {len(todo)} model(s): {', '.join(todo) or '(none)'}"
        + (f"; {', '.join(one_by_one)} one at a time, after the others" if one_by_one else ""))
    loaded = load_all(args.url, key, load_timeout_s, state, together, one_by_one, log)
    say(f"{loaded} of {len(todo)} loaded" + (f"; left out: {', '.join(left_out)}" if left_out else ""))
    return 0 if loaded == len(todo) and not left_out else 1


def load_all(base: str, key: str | None, timeout_s: float, state: State, together: list[str],
             one_by_one: list[str], log: str) -> int:
    """How many loaded: `together` in parallel, then each of `one_by_one` alone. Each is in
    flight in the state until Triton has settled it: when Triton dies under a load, the container
    (and this loader with it) goes down, and the next start finds it there (after_restart). A
    load still running when our wait ends stays in flight; a suspect is "alone" only when none is."""
    loaded = 0
    state.flying(together, log=log)
    unsettled: list[str] = []

    def ended(name: str, ok: bool, text: str, settled: bool) -> int:
        """One load's end said, and kept in flight unless Triton settled it; 1 when it loaded."""
        if settled:
            state.landed(name)
        else:
            unsettled.append(name)
        say(f"{name}: {text}" if ok else f"{name}: FAILED: {text}")
        return int(ok)

    def settle(bound_s: float) -> list[str]:
        still = still_loading(base, key, unsettled, bound_s)
        for name in set(unsettled) - set(still):  # ended in Triton (READY or not): no longer in flight
            state.landed(name)
        return still

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(together)))) as pool:
        futures = {pool.submit(load, base, name, key, timeout_s): name for name in together}
        for future in as_completed(futures):  # one line per model as soon as it is done
            loaded += ended(futures[future], *future.result())
    for name in one_by_one:
        unsettled = settle(timeout_s)
        state.flying([*unsettled, name], alone=not unsettled, log=log)
        loaded += ended(name, *load(base, name, key, timeout_s))
    state.flying(settle(SETTLE_LIMIT_S), log=log)  # what Triton still loads: in flight for the next start
    return loaded


if __name__ == "__main__":
    sys.exit(main())
