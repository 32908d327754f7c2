"""A read-only member seen through what Triton leaves open, with no key on any call.

Triton's repository index sits in the restricted `model-repository` group (FACTS.md), so a
member not proven to belong (geadmin.fleet.membership) is read from the open groups instead:
liveness, readiness and server metadata (health, metadata), its models from the statistics
API (`/v2/models/stats`: every version Triton has loaded) with each version's readiness, and
its /metrics page. What this cannot show: a model that failed to load or was never loaded
(only the index lists those); the Fleet page and `geadmin fleet status` say a read-only
member's row is what it serves, not what failed.
"""

from __future__ import annotations

from geadmin.domain import ModelEntry, ModelState
from geadmin.fleet.members import Member
from geadmin.triton.client import TritonClient

OPEN_REASON = "read from Triton's open statistics API (read-only member: no key)"
MAX_MODELS = 500  # model versions a read-only member may list: each costs a readiness call


class OpenClient(TritonClient):
    """A TritonClient that never holds a key and lists models from the open endpoints."""

    def __init__(self, url: str, *, timeout_s: float) -> None:
        super().__init__(url, admin_key=None, timeout_s=timeout_s)

    def repository_index(self) -> list[ModelEntry]:
        entries = []
        for stats in self.model_statistics()[:MAX_MODELS]:  # a member nobody vouched for may lie
            ready = self.model_ready(stats.name, stats.version)
            state = ModelState.READY if ready else ModelState.UNAVAILABLE
            entries.append(ModelEntry(stats.name, stats.version, state, "" if ready else OPEN_REASON))
        return sorted(entries, key=lambda e: (e.name, e.version))


def client_for(member: Member, timeout_s: float) -> TritonClient:
    """The client a poll of `member` uses: its key only when trusted, else an OpenClient."""
    if member.trust.trusted:
        return TritonClient(member.url, admin_key=member.spec.admin_key, timeout_s=timeout_s,
                            tls_ca=str(member.tls_ca) if member.tls_ca is not None else None)
    return OpenClient(member.url, timeout_s=timeout_s)
