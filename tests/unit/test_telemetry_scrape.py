"""geadmin.telemetry.sources.scrape: real /metrics pages into samples, every fetch failure into its own
error, garbage into MetricsParseError.

Assets (tests/unit/assets/telemetry/): `metrics_2.51_default.txt` and
`metrics_2.51_summary_latencies.txt` are the reference pages of Triton 2.51 (shared/reference);
`metrics_2.51_npu_ge_acl_double.txt` was recorded from the real tritonserver running the npu_ge
backend on the ACL test double (two models on devices 0 and 1, 20 requests each).
"""

from __future__ import annotations

import http.client
import socket
import threading
import urllib.error
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geadmin.errors import (
    ConfigError,
    GeAdminError,
    MetricsHTTPError,
    MetricsParseError,
    MetricsTimeoutError,
    MetricsUnavailableError,
    MetricsUnreachableError,
    TelemetryError,
)
from geadmin.telemetry.sources import scrape as scrape_module
from geadmin.telemetry.sources.scrape import fetch_text, parse, scrape, translate_error
from tests.support.http_doubles import closed_port, serve
from tests.support.hypothesis_profiles import examples

ASSETS = Path(__file__).parent / "assets" / "telemetry"
DEFAULT_PAGE = (ASSETS / "metrics_2.51_default.txt").read_text()
SUMMARY_PAGE = (ASSETS / "metrics_2.51_summary_latencies.txt").read_text()


# -- local servers that answer (or fail to) like a metrics endpoint ------------------------
@contextmanager
def silent_server() -> Iterator[str]:
    """Accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/metrics"


@contextmanager
def non_http_server() -> Iterator[str]:
    """Answers every connection with an SSH banner, as a wrong port would."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)

    def answer() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(1024)
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    threading.Thread(target=answer, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/metrics"
    finally:
        sock.close()


# -- parsing real pages ------------------------------------------------------------------
def test_default_page_parses_into_samples_with_labels_and_types() -> None:
    page = parse(DEFAULT_PAGE, timestamp_s=123.0)
    assert page.timestamp_s == 123.0
    assert page.type_of("nv_inference_count") == "counter"
    assert page.type_of("nv_cpu_utilization") == "gauge"
    assert page.type_of("npu_probe_compute_us") == "histogram"
    (sample,) = page.find("nv_inference_count", model="py_np")
    assert sample.label_map == {"model": "py_np", "version": "1"} and sample.value == 20
    assert page.value("nv_inference_exec_count", model="probe_identity", version="1") == 33
    assert page.value("nv_cpu_memory_total_bytes") == 25275973632


def test_counters_answer_to_the_page_name_and_the_parsers_total_name() -> None:
    page = parse(DEFAULT_PAGE)
    # prometheus_client calls Triton's `nv_inference_count` samples `nv_inference_count_total`
    assert page.find("nv_inference_count") == page.find("nv_inference_count_total")
    assert len(page.find("nv_inference_count")) == 2
    # a counter the page already spells with _total is found both ways too
    assert page.value("npu_probe_execute_total") == page.value("npu_probe_execute") == 33


def test_value_sums_every_matching_sample_and_none_when_nothing_matches() -> None:
    page = parse(DEFAULT_PAGE)
    assert len(page.find("nv_inference_request_failure", model="py_np")) == 4  # one per reason
    assert page.value("nv_inference_request_failure", model="py_np") == 0.0
    assert page.value("nv_inference_request_failure", model="py_np", reason="BACKEND") == 0.0
    assert page.value("nv_inference_count", model="no_such_model") is None
    assert page.value("no_such_metric") is None


def test_summary_page_has_quantile_samples_per_stage() -> None:
    page = parse(SUMMARY_PAGE)
    quantiles = {s.label("quantile"): s.value
                 for s in page.find("nv_inference_request_summary_us", model="py_np")}
    assert quantiles == {"0.5": 1053, "0.9": 3443, "0.95": 4248, "0.99": 4248, "0.999": 4248}
    assert page.value("nv_inference_queue_summary_us_count", model="probe_identity") == 65


def test_npu_ge_page_recorded_from_the_real_server_parses() -> None:
    page = parse((ASSETS / "metrics_2.51_npu_ge_acl_double.txt").read_text())
    assert page.value("npu_ge_hbm_total_bytes", device="0") == 34359738368
    assert len(page.find("npu_ge_instance_device")) == 3


def test_nan_values_are_kept_as_samples_but_not_summed() -> None:
    page = parse('a{b="c"} NaN\na{b="d"} 2\n')
    assert len(page.find("a")) == 2
    assert page.value("a") == 2.0
    assert page.value("a", b="c") is None


def test_an_empty_page_is_a_scrape_without_samples() -> None:
    assert parse("").samples == ()
    assert parse("\n\n# just a comment\n").samples == ()


@pytest.mark.parametrize("garbage", [
    "<html><body><h1>404 Not Found</h1></body></html>",
    "hello world",
    '# TYPE x counter\nx{a="1" 3',
    "{}",
    "nv_inference_count{model=py_np} 3",
    "binary\x00data",
])
def test_text_that_is_not_prometheus_format_is_a_parse_error(garbage: str) -> None:
    with pytest.raises(MetricsParseError) as caught:
        parse(garbage, url="http://h:8002/metrics")
    assert isinstance(caught.value, TelemetryError) and isinstance(caught.value, GeAdminError)
    assert "http://h:8002/metrics" in str(caught.value)


def test_parse_error_points_at_the_line_it_quotes() -> None:
    with pytest.raises(MetricsParseError) as caught:
        parse("good 1\n<html>broken</html>\n")
    assert caught.value.line == 2


# -- fetching over real sockets ------------------------------------------------------------
def test_scrape_reads_a_real_http_endpoint() -> None:
    with serve(DEFAULT_PAGE.encode()) as url:
        page = scrape(url, timeout_s=5)
    assert page.url == url and page.timestamp_s > 0
    assert page.value("nv_inference_count", model="py_np") == 20


def test_connection_refused_is_unreachable_not_a_timeout() -> None:
    url = f"http://127.0.0.1:{closed_port()}/metrics"
    with pytest.raises(MetricsUnreachableError) as caught:
        fetch_text(url, timeout_s=2)
    assert not isinstance(caught.value, MetricsTimeoutError)
    assert url in str(caught.value) and "refused" in str(caught.value).lower()


def test_a_server_that_never_answers_is_a_timeout() -> None:
    with silent_server() as url, pytest.raises(MetricsTimeoutError) as caught:
        fetch_text(url, timeout_s=0.3)
    assert "no answer in time" in str(caught.value)


@pytest.mark.parametrize("status", [404, 500, 503])
def test_http_error_status_is_an_http_error_with_the_code(status: int) -> None:
    with serve(b"nope", status=status) as url, pytest.raises(MetricsHTTPError) as caught:
        fetch_text(url, timeout_s=5)
    assert caught.value.status == status and f"HTTP {status}" in str(caught.value)


def test_a_port_that_does_not_speak_http_is_an_http_error() -> None:
    with non_http_server() as url, pytest.raises(MetricsHTTPError) as caught:
        fetch_text(url, timeout_s=5)
    assert "not a metrics page" in str(caught.value)


def test_a_page_of_garbage_over_http_is_a_parse_error() -> None:
    with serve(b"<html>login required</html>") as url, pytest.raises(MetricsParseError):
        scrape(url, timeout_s=5)


@pytest.mark.parametrize("url", ["ftp://host/metrics", "127.0.0.1:8002/metrics", "http://127.0.0.1:99999/x"])
def test_urls_that_cannot_be_fetched_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError):
        fetch_text(url, timeout_s=1)


# -- the translation table is complete ------------------------------------------------------
def _subclasses(cls: type[BaseException]) -> list[type[BaseException]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found += _subclasses(sub)
    return found


def _instance(cls: type[BaseException]) -> BaseException:
    if issubclass(cls, urllib.error.HTTPError):
        return cls("http://h/metrics", 502, "Bad Gateway", None, None)  # type: ignore[arg-type]
    if issubclass(cls, urllib.error.ContentTooShortError):
        return cls("x", b"")
    return cls("x")


NETWORK_ERRORS = sorted(
    {c for c in (*_subclasses(http.client.HTTPException), *_subclasses(ConnectionError), TimeoutError,
                 socket.gaierror, socket.herror, OSError, *_subclasses(urllib.error.URLError))
     if c.__module__ in ("builtins", "socket", "http.client", "urllib.error")},
    key=lambda c: f"{c.__module__}.{c.__qualname__}")


@pytest.mark.parametrize("exc_type", NETWORK_ERRORS, ids=lambda c: c.__qualname__)
def test_every_network_exception_maps_to_a_specific_error(exc_type: type[BaseException]) -> None:
    ours = translate_error(_instance(exc_type), "http://h/metrics")
    assert type(ours) in (MetricsUnreachableError, MetricsTimeoutError, MetricsHTTPError), exc_type
    assert "http://h/metrics" in str(ours)
    # wrapped by urllib, the same cause gives the same error
    if not issubclass(exc_type, urllib.error.URLError):
        wrapped = translate_error(urllib.error.URLError(_instance(exc_type)), "http://h/metrics")
        assert type(wrapped) is type(ours)


@pytest.mark.parametrize(("exc", "expected"), [
    (ConnectionRefusedError(111, "Connection refused"), MetricsUnreachableError),
    (socket.gaierror(-2, "Name or service not known"), MetricsUnreachableError),
    (TimeoutError("timed out"), MetricsTimeoutError),
    (http.client.BadStatusLine("SSH-2.0"), MetricsHTTPError),
    (http.client.RemoteDisconnected("closed"), MetricsUnreachableError),
])
def test_the_table_keeps_refused_unreachable_and_slow_apart(exc: BaseException,
                                                            expected: type[MetricsUnavailableError]) -> None:
    assert type(translate_error(exc, "u")) is expected


def test_table_lists_subclasses_before_their_bases() -> None:
    types = [t for t, _ in scrape_module.EXCEPTION_ERRORS]
    for i, earlier in enumerate(types):
        for later in types[i + 1:]:
            assert not issubclass(later, earlier), f"{later} is shadowed by {earlier}"


# -- property: any text parses or fails with MetricsParseError ----------------------------
REFERENCE_LINES = SUMMARY_PAGE.splitlines()


@settings(max_examples=examples(300), deadline=None)
@given(st.text())
def test_parse_arbitrary_text_only_raises_parse_errors(text: str) -> None:
    try:
        page = parse(text)
    except MetricsParseError as exc:
        assert str(exc)
        return
    assert all(isinstance(s.value, float) for s in page.samples)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(REFERENCE_LINES), st.integers(0, 200), st.text(max_size=3)),
                max_size=30))
def test_parse_mangled_reference_pages_only_raises_parse_errors(edits: list[tuple[str, int, str]]) -> None:
    text = "\n".join(line[:cut] + noise + line[cut:] for line, cut, noise in edits)
    with suppress(MetricsParseError):
        parse(text)
