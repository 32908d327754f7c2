"""TLS as the proof that a member belongs (geadmin.fleet.membership), against a real
tritonserver whose gRPC endpoint serves TLS (`--grpc-use-ssl`) with a certificate from a CA the
test makes (tests/support/tls_certs.py), and whose restricted APIs need the key. Its HTTP
endpoint has no TLS (Triton has none there): the member is addressed grpcs:// and every call,
the keyed ones included, goes over gRPC with the fleet's CA pinned."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from geadmin.access import guard
from geadmin.errors import FleetError
from geadmin.fleet.discovery import Fleet, discover
from geadmin.fleet.gate import GateSettings
from geadmin.fleet.membership import Proof
from geadmin.fleet.polling import poll
from geadmin.fleet.rollout import Change, rollout
from geadmin.stack.tritonserver import TritonProcess
from tests.support.processes import TEST_EXIT_TIMEOUT_S
from tests.support.samples import LOAD_MODEL, copy_samples
from tests.support.tls_certs import Issued, issue

pytestmark = pytest.mark.integration

KEY = "tls-fleet-key"


@dataclass
class Lab:
    triton: TritonProcess
    issued: Issued
    stranger: Issued  # another CA

    def fleet(self, ca: Path) -> Fleet:
        ports = self.triton.ports
        source = f"dns:127.0.0.1:{ports.http}?grpc_port={ports.grpc}&metrics_port={ports.metrics}"
        return Fleet("tls", (source,), admin_key=KEY, proof=Proof(tls_ca=ca, where="tls_ca_file"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("fleet_tls")
    issued = issue(root / "ca")
    triton = TritonProcess(copy_samples(root / "repo"), models=[LOAD_MODEL], admin_key=KEY,
                           log_path=root / "triton.log", exit_timeout_s=TEST_EXIT_TIMEOUT_S,
                           extra_args=["--grpc-use-ssl=true", f"--grpc-server-cert={issued.cert}",
                                       f"--grpc-server-key={issued.key}"])
    triton.start()
    try:
        yield Lab(triton, issued, issue(root / "other", ca_name="another CA"))
    finally:
        triton.stop()


def test_a_member_whose_grpc_certificate_chains_to_the_fleets_ca_is_keyed_over_grpcs(lab: Lab) -> None:
    found = discover(lab.fleet(lab.issued.ca))
    (member,) = found.members
    grpc = f"127.0.0.1:{lab.triton.ports.grpc}"
    assert member.trust.trusted and member.spec.admin_key == KEY
    assert member.url == f"grpcs://{grpc}" and member.trust.why.startswith(f"gRPC over TLS at {grpc}")
    status = poll(found, timeout_s=20)
    (view,) = status.servers
    assert view.problem == "", view.problem
    # The repository index (restricted) answered over gRPC+TLS: it lists the models not loaded too.
    assert LOAD_MODEL in status.models and len(status.models) > 1, status.models
    result = rollout(found.members, Change.RELOAD, LOAD_MODEL, gate=GateSettings(requests=0),
                     auth=guard.os_user(), home=lab.triton.repository.parent / "home", timeout_s=60)
    assert result.ok, result.headline


def test_a_certificate_from_another_ca_proves_nothing_and_the_member_stays_read_only(lab: Lab) -> None:
    found = discover(lab.fleet(lab.stranger.ca))
    (member,) = found.members
    assert not member.trust.trusted and member.spec.admin_key is None and member.url.startswith("http://")
    assert "its certificate does not chain to" in member.trust.why
    status = poll(found, timeout_s=20)
    assert status.servers[0].problem == "" and status.models == [LOAD_MODEL]  # the open statistics API
    with pytest.raises(FleetError, match="not proven to belong"):
        rollout(found.members, Change.RELOAD, LOAD_MODEL, gate=GateSettings(requests=0), auth=guard.os_user(),
                home=lab.triton.repository.parent / "home")
