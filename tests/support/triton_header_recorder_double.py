"""A TEST DOUBLE of Triton's HTTP endpoint that records the headers of every request: not
Triton, and nothing of the product uses it (tests/unit/test_admin_key_routing.py).

Why not the real tritonserver: the tests prove which requests carry the admin key, and Triton
never shows the headers it received; with its restricted APIs on it rejects a keyless
restricted call, but it cannot tell that an unrestricted call (health, metadata, inference)
carried the key it must never see. And these are unit tests: no server is started in the fast
tier (tests/support/tiers.py). The real twin: tests/integration/test_fleet_membership.py
sends the key to a real tritonserver whose repository API needs it.

Strict where Triton is: the answers are Triton's HTTP/REST (KServe v2) bodies for the paths
geadmin's client calls (`ANSWERS`), anything else a 404 with Triton's `{"error": ...}` body.
"""

from __future__ import annotations

from tests.support.http_doubles import JsonServiceDouble

INFER_RESPONSE = {"model_name": "m", "model_version": "1",
                  "outputs": [{"name": "y", "datatype": "FP32", "shape": [1], "data": [1.0]}]}
ANSWERS = {  # path -> the JSON Triton would answer
    "/v2/health/live": {}, "/v2/health/ready": {},
    "/v2": {"name": "triton", "version": "2.51.0", "extensions": []},
    "/v2/models/m": {"name": "m", "versions": ["1"], "platform": "python",
                     "inputs": [{"name": "x", "datatype": "FP32", "shape": [1]}],
                     "outputs": [{"name": "y", "datatype": "FP32", "shape": [1]}]},
    "/v2/models/m/ready": {}, "/v2/models/m/stats": {"model_stats": []},
    "/v2/models/m/config": {"name": "m", "backend": "python"},
    "/v2/models/m/infer": INFER_RESPONSE,
    "/v2/repository/index": [{"name": "m", "version": "1", "state": "READY"}],
    "/v2/repository/models/m/load": {}, "/v2/repository/models/m/unload": {},
    "/v2/logging": {"log_verbose_level": 0},
}


class TritonHeaderRecorderDouble(JsonServiceDouble):
    """Answers like Triton over HTTP and records (method, path, headers) of each request."""

    def __init__(self) -> None:
        super().__init__(lambda path: (200, ANSWERS[path]) if path in ANSWERS
                         else (404, {"error": "unknown"}))

    def keyed(self) -> list[str]:
        """The paths of the requests that carried an admin key."""
        return [path for _, path, headers in self.requests if "admin-key" in headers]
