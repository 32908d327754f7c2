"""geadmin reads at most ANSWER_LIMIT_BYTES of one answer (geadmin.triton.connection): a
replica impostor on 127.0.0.2 answers the repository index with far more, announced in
Content-Length or streamed until it hangs up. The read stops at the limit — the impostor
counts what was taken — and the error says why, at once, with the address."""

from __future__ import annotations

import pytest

from geadmin.errors import AnswerTooLargeError
from geadmin.stack.processes import free_port
from geadmin.triton import connection
from geadmin.triton.client import TritonClient
from tests.support.replica_impostor import impostor

HOST = "127.0.0.2"
LIMIT = 1 << 20  # the product's 64 MiB, made small so the test moves little


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "ANSWER_LIMIT_BYTES", LIMIT)


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "streamed"])
def test_an_index_over_the_limit_is_refused_after_reading_no_more_than_the_limit(announced: bool) -> None:
    ports = [free_port(HOST) for _ in range(3)]
    with impostor(HOST, *ports, flood=64 * LIMIT, flood_announced=announced) as fake, \
            TritonClient(fake.http_url, timeout_s=10) as client:
        assert client.is_live()  # small answers pass as before
        with pytest.raises(AnswerTooLargeError) as refused:
            client.repository_index()
        assert client.is_live()  # the connection that was cut is not reused half read
    message = str(refused.value)
    assert message.startswith(f"list the model repository: {fake.http_url} sent an answer too large to "
                              "read (")
    assert "geadmin reads at most 1 MiB" in message if announced else "still sending past 1 MiB" in message
    assert "not a Triton, or not one to trust" in message
    assert fake.flood_sent <= LIMIT + (8 << 20)  # socket buffers hold a few MB; never the 64 MB offered


def test_an_index_under_the_limit_is_read_whole() -> None:
    ports = [free_port(HOST) for _ in range(3)]
    with impostor(HOST, *ports, flood=LIMIT // 2) as fake, TritonClient(fake.http_url) as client:
        index = client.repository_index()
    assert sum(entry.name == "m" for entry in index) > 5000
