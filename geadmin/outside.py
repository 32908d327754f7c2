"""Input from outside geadmin's control, kept data: answers of Prometheus, Alertmanager and the
Kubernetes API read with a bound on size and nesting, text stripped of terminal control
characters, and links accepted only under a configured base URL.

Anyone who can answer for such a service (or post an alert to an Alertmanager, which takes
alerts without authentication by default) chooses these bytes. So:

- `read_limited` reads at most `max_bytes` of an answer (decoded, so a small gzip bomb counts
  at its real size) and refuses a longer one before it is parsed;
- `loads` refuses a JSON document nested deeper than `max_depth` before the parser sees it:
  Python's parser recurses, and 100,000 `[` end in a RecursionError, a traceback;
- `plain` drops control characters (an ANSI escape or an OSC 8 hyperlink in a summary would
  act on the operator's terminal) and cuts long text;
- `under_base` says whether a URL points under one of the configured bases: only those are
  shown as links, everything else as text.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np

from geadmin.errors import GeAdminError

Refusal = Callable[[str], GeAdminError]  # the caller's own error for "refused": PrometheusError, ...

MAX_ANSWER_BYTES = 32 * 1024 * 1024  # a week of 1-minute points for a few hundred series fits
MAX_DEPTH = 64  # Prometheus's answers nest 6 levels, a Kubernetes PodList about 12
MAX_TEXT_CHARS = 2000

_QUOTE, _OPEN_ARRAY, _OPEN_OBJECT, _CLOSE_ARRAY, _CLOSE_OBJECT = (ord(c) for c in '"[{]}')
_SCAN_CHUNK = 1 << 20
_URL_SAFE = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'*+,;=%()]+")


def read_limited(chunks: Iterable[bytes], *, what: str, error: Refusal,
                 max_bytes: int | None = None) -> bytes:
    """The answer's bytes; `error(message)` is raised once more than `max_bytes` (default
    MAX_ANSWER_BYTES) have arrived, and nothing more is read."""
    max_bytes = MAX_ANSWER_BYTES if max_bytes is None else max_bytes
    parts, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise error(f"{what} is larger than {_size(max_bytes)}: refused unread (a real answer is far "
                        "smaller; is the URL the service's?)")
        parts.append(chunk)
    return b"".join(parts)


def loads(data: bytes | str, *, what: str, error: Refusal, max_bytes: int | None = None,
          max_depth: int = MAX_DEPTH) -> Any:
    """The JSON document in `data`. Raises `error(message)` when it is over `max_bytes`
    (default MAX_ANSWER_BYTES) or nested deeper than `max_depth`, and ValueError (json's) when
    it is not JSON."""
    max_bytes = MAX_ANSWER_BYTES if max_bytes is None else max_bytes
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise error(f"{what} is larger than {_size(max_bytes)}: refused unread")
    if nesting(raw) > max_depth:
        raise error(f"{what} is JSON nested deeper than {max_depth} levels: refused unparsed (no answer "
                    "of this service nests that deep)")
    try:
        return json.loads(raw)
    except RecursionError as exc:  # the scan above makes this unreachable; a traceback it must never be
        raise error(f"{what} is JSON nested too deep to parse") from exc


def nesting(raw: bytes) -> int:
    """How deep the arrays and objects of `raw` nest, in linear time at C speed (numpy, in
    chunks of a MiB): escaped backslashes and quotes removed (as JSON reads escapes, left to
    right), a bracket counts when an even number of quotes precede it (outside strings), and
    the depth is the highest running count of opened minus closed brackets. Unclosed
    brackets count: the parser would recurse into them before finding the document broken."""
    data = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    deepest, level, quotes = 0, 0, 0
    for start in range(0, len(data), _SCAN_CHUNK):
        codes = np.frombuffer(data, dtype=np.uint8, count=min(_SCAN_CHUNK, len(data) - start), offset=start)
        seen = quotes + np.cumsum(codes == _QUOTE, dtype=np.int64)
        outside_strings = seen % 2 == 0
        opens = ((codes == _OPEN_ARRAY) | (codes == _OPEN_OBJECT)) & outside_strings
        closes = ((codes == _CLOSE_ARRAY) | (codes == _CLOSE_OBJECT)) & outside_strings
        running = level + np.cumsum(opens.astype(np.int64) - closes.astype(np.int64))
        deepest, level, quotes = max(deepest, int(running.max())), int(running[-1]), int(seen[-1])
    return deepest


def plain(text: object, limit: int = MAX_TEXT_CHARS) -> str:
    """`text` as a str without control characters (newlines and tabs kept as spaces or breaks),
    bidirectional overrides or zero-width tricks, cut to `limit` characters with an ellipsis."""
    kept = []
    for char in str(text):
        if char == "\n":
            kept.append(char)
        elif char == "\t":
            kept.append(" ")
        elif unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Co", "Cn"):
            kept.append(char)
    cleaned = "".join(kept)
    return cleaned if len(cleaned) <= limit else cleaned[: max(0, limit - 1)] + "…"


def under_base(url: str, bases: Sequence[str]) -> bool:
    """True when `url` is an http(s) URL under one of `bases` (same scheme, host and port, path
    inside the base's path): only then is it shown as a link. User info, `.`/`..` segments,
    spaces and characters a URL never holds refuse it."""
    if not url or not _URL_SAFE.fullmatch(url):
        return False
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        return False
    if any(segment in (".", "..") for segment in unquote(parts.path).split("/")):
        return False
    return any(_inside(parts.scheme, parts.hostname, port, parts.path, base) for base in bases if base)


def _inside(scheme: str, host: str, port: int | None, path: str, base: str) -> bool:
    try:
        allowed = urlsplit(base)
        allowed_port = allowed.port
    except ValueError:
        return False
    defaults = {"http": 80, "https": 443}
    if (allowed.scheme, (allowed.hostname or "")) != (scheme, host.lower()):
        return False
    if (allowed_port or defaults.get(scheme)) != (port or defaults.get(scheme)):
        return False
    prefix = allowed.path.rstrip("/")
    return path == prefix or path.startswith(prefix + "/") or (not prefix and not path)


def _size(count: int) -> str:
    return f"{count / 1024 / 1024:g} MiB" if count >= 1024 * 1024 else f"{count} bytes"
