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

Environment: TRITON_LOAD_MODELS, TRITON_ADMIN_KEY (the restricted API's key, sent as the
`admin-key` header), TRITON_LOAD_TIMEOUT (seconds per model, default 300),
TRITON_LIVE_TIMEOUT (seconds to wait for the server, default 600).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed

PREFIX = "load-models:"
TRIAL_MARKER = ".geadmin-trial.json"  # geadmin.repository.trials.MARKER


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


def load(base: str, name: str, key: str | None, timeout_s: float) -> tuple[str, bool, str]:
    started = time.monotonic()
    try:
        call(f"{base}/v2/repository/models/{name}/load", {}, key, timeout_s)
    except TimeoutError:
        return name, False, f"still loading after {timeout_s:.0f}s (Triton keeps trying)"
    except (OSError, ValueError) as exc:
        if isinstance(getattr(exc, "reason", None), TimeoutError):
            return name, False, f"still loading after {timeout_s:.0f}s (Triton keeps trying)"
        return name, False, error_text(exc)
    return name, True, f"loaded in {time.monotonic() - started:.1f}s"


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
    todo = [name for name in names if name in present and present[name] != "READY"]
    say(f"loading {len(todo)} model(s): {', '.join(todo) or '(none)'}")
    loaded = 0
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(todo)))) as pool:
        futures = [pool.submit(load, args.url, name, key, load_timeout_s) for name in todo]
        for future in as_completed(futures):  # one line per model as soon as it is done
            name, ok, text = future.result()
            loaded += ok
            say(f"{name}: {text}" if ok else f"{name}: FAILED: {text}")
    say(f"{loaded} of {len(todo)} loaded")
    return 0 if loaded == len(todo) else 1


if __name__ == "__main__":
    sys.exit(main())
