"""Read a Prometheus text page (Triton's /metrics, npu-exporter's) into frozen samples.

`fetch_text` gets the page over HTTP with a timeout; every way that can fail leaves as one
`MetricsUnavailableError` subclass, picked by one table (`EXCEPTION_ERRORS`, a test walks
it): nothing answers -> `MetricsUnreachableError`, too slow -> `MetricsTimeoutError`, an
HTTP error or an answer that is not HTTP -> `MetricsHTTPError`. `parse` turns the text into
a `Scrape` through `prometheus_client`'s own parser; text it rejects is a
`MetricsParseError`, never a crash.
"""

from __future__ import annotations

import http.client
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from geadmin.errors import (
    ConfigError,
    MetricsHTTPError,
    MetricsParseError,
    MetricsTimeoutError,
    MetricsUnavailableError,
    MetricsUnreachableError,
)
from geadmin.failure_table import CONNECTION_FAILURES

DEFAULT_TIMEOUT_S = 5.0
MAX_PAGE_BYTES = 64 << 20  # a /metrics page with thousands of models is a few MB
Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Sample:
    """One line of the page: `name{labels} value`. Labels are sorted (name, value) pairs."""

    name: str
    labels: Labels
    value: float

    def label(self, key: str, default: str | None = None) -> str | None:
        for name, value in self.labels:
            if name == key:
                return value
        return default

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    def matches(self, wanted: dict[str, str]) -> bool:
        have = dict(self.labels)
        return all(have.get(k) == v for k, v in wanted.items())


@dataclass(frozen=True)
class Scrape:
    """Every sample of one page, read at `timestamp_s` (seconds since the epoch).

    Sample names are the parser's: a counter's samples are called `<family>_total` even when
    the page says `nv_inference_count`; `find` and `value` accept both spellings.
    """

    timestamp_s: float
    samples: tuple[Sample, ...]
    types: tuple[tuple[str, str], ...] = ()  # (family, "counter" | "gauge" | "summary" | ...)
    url: str = ""
    _by_name: dict[str, tuple[Sample, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, list[Sample]] = {}
        for sample in self.samples:
            index.setdefault(sample.name, []).append(sample)
        # prometheus_client names every counter sample `<family>_total`, whatever the page
        # printed (Triton prints `nv_inference_count`): answer to both spellings.
        for family, kind in self.types:
            if kind == "counter" and family + "_total" in index and family not in index:
                index[family] = index[family + "_total"]
        object.__setattr__(self, "_by_name", {k: tuple(v) for k, v in index.items()})

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._by_name)

    def has(self, name: str) -> bool:
        return name in self._by_name

    def find(self, name: str, **labels: str) -> tuple[Sample, ...]:
        """The samples called `name` whose labels include `labels`."""
        found = self._by_name.get(name, ())
        return found if not labels else tuple(s for s in found if s.matches(labels))

    def value(self, name: str, **labels: str) -> float | None:
        """The value of the one sample that matches (None: none does, or it is NaN).
        Several matches are summed (e.g. a counter over every `reason`)."""
        found = [s.value for s in self.find(name, **labels) if not math.isnan(s.value)]
        return math.fsum(found) if found else None

    def type_of(self, family: str) -> str | None:
        return dict(self.types).get(family)


# -- fetching --------------------------------------------------------------------------
# Exceptions urllib / http.client / socket raise, in isinstance order (subclasses first),
# to the error we raise. `urllib.error.URLError` wraps the socket error in `.reason`:
# `translate_error` unwraps it first and looks the reason up here.
EXCEPTION_ERRORS: tuple[tuple[type[BaseException], type[MetricsUnavailableError]], ...] = (
    (urllib.error.HTTPError, MetricsHTTPError),
    (http.client.RemoteDisconnected, MetricsUnreachableError),  # closed before answering
    *((kind, MetricsUnreachableError) for kind in CONNECTION_FAILURES),
    (TimeoutError, MetricsTimeoutError),  # socket.timeout is TimeoutError since 3.10
    (http.client.IncompleteRead, MetricsUnreachableError),  # closed mid-answer
    (http.client.HTTPException, MetricsHTTPError),  # an answer that is not HTTP
    (urllib.error.ContentTooShortError, MetricsUnreachableError),  # closed mid-answer
    (urllib.error.URLError, MetricsUnreachableError),  # a reason that is a plain string
    (OSError, MetricsUnreachableError),  # EHOSTUNREACH, ENETUNREACH, ...
)

_WHY = {
    MetricsUnreachableError: "nothing answers — is the server running, and is the URL right?",
    MetricsTimeoutError: "no answer in time",
    MetricsHTTPError: "the answer is not a metrics page",
    MetricsUnavailableError: "cannot be read",
}


def translate_error(exc: BaseException, url: str) -> MetricsUnavailableError:
    """Turn what urlopen raised into our error, with the cause in the message."""
    cause: BaseException = exc
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError) \
            and isinstance(exc.reason, BaseException):
        cause = exc.reason
    ours: type[MetricsUnavailableError] = MetricsUnavailableError
    for exc_type, mapped in EXCEPTION_ERRORS:
        if isinstance(cause, exc_type):
            ours = mapped
            break
    if isinstance(cause, urllib.error.HTTPError):
        return MetricsHTTPError(f"metrics at {url}: HTTP {cause.code} {cause.reason}", url=url,
                                status=cause.code)
    detail = str(cause) or type(cause).__name__
    return ours(f"metrics at {url}: {_WHY[ours]} ({detail})", url=url)


def fetch_text(url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """The body of `url` as text (UTF-8; undecodable bytes replaced)."""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"a metrics URL must start with http:// or https://, got {url!r}")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError when out of range
    except ValueError as exc:
        raise ConfigError(f"not a usable metrics URL {url!r}: {exc}") from exc
    if not parts.hostname:
        raise ConfigError(f"a metrics URL needs a host, got {url!r}")
    request = urllib.request.Request(url, headers={"Accept": "text/plain"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read(MAX_PAGE_BYTES + 1)
    except ValueError as exc:  # urllib rejects the URL itself (bad port, no host)
        raise ConfigError(f"not a usable metrics URL {url!r}: {exc}") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise translate_error(exc, url) from exc
    if len(body) > MAX_PAGE_BYTES:
        raise MetricsHTTPError(f"metrics at {url}: the page is larger than {MAX_PAGE_BYTES >> 20} MB "
                               "— is this a metrics endpoint?", url=url)
    return body.decode("utf-8", errors="replace")


def scrape(url: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Scrape:
    """Fetch and parse one page; `timestamp_s` is when the answer arrived."""
    text = fetch_text(url, timeout_s=timeout_s)
    return parse(text, timestamp_s=time.time(), url=url)


# -- parsing ---------------------------------------------------------------------------
# What prometheus_client's parser raises on text it cannot read (checked with hypothesis).
_PARSER_ERRORS = (ValueError, IndexError, KeyError, TypeError, AttributeError)


def families_only(text: str, prefixes: tuple[str, ...]) -> str:
    """The lines of a page whose metric name (sample, # HELP or # TYPE) starts with one of
    `prefixes`: parsing a few families of a large page costs a fraction of parsing it all."""
    kept = []
    for line in text.splitlines():
        name = line[7:] if line.startswith(("# HELP ", "# TYPE ")) else line
        if name.startswith(prefixes):
            kept.append(line)
    return "\n".join(kept) + "\n"


def parse(text: str, *, timestamp_s: float | None = None, url: str = "") -> Scrape:
    """Parse Prometheus text exposition format into a `Scrape` (timestamp: now by default)."""
    if "\x00" in text:  # binary data: the parser would read it as names
        raise MetricsParseError(_where(url) + "the page holds binary data, not Prometheus text", url=url)
    samples: list[Sample] = []
    types: list[tuple[str, str]] = []
    try:
        for family in text_string_to_metric_families(text):
            types.append((family.name, family.type))
            samples.extend(_samples(family.samples))
    except _PARSER_ERRORS as exc:
        raise MetricsParseError(f"{_where(url)}not Prometheus text format: {_short(exc)}", url=url,
                                line=_line_of(text, exc)) from exc
    return Scrape(time.time() if timestamp_s is None else timestamp_s, tuple(samples), tuple(types), url)


def _samples(raw: Iterable[object]) -> Iterator[Sample]:
    for sample in raw:
        name, labels, value = sample[0], sample[1], sample[2]  # type: ignore[index]
        yield Sample(name, tuple(sorted(labels.items())), float(value))  # the parser gives str labels


def _where(url: str) -> str:
    return f"metrics at {url}: " if url else ""


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "…"


def _line_of(text: str, exc: BaseException) -> int | None:
    """The 1-based line the parser quotes in its message, when it quotes one."""
    message = str(exc)
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip() and line.strip() in message:
            return number
    return None
