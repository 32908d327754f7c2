"""Helpers shared by the test tiers. Test modules import from here, never from one another
(tests/unit/test_test_tiers.py fails on an import of a `test_*.py` module or a conftest).

- `samples`: the packaged sample repository, its model names, requests to its models.
- `processes`: bounded waits, process trees, reading a subprocess's output.
- `prometheus`: a real Prometheus server scraping given targets.
- `apptest`: what every Streamlit AppTest module needs.
- `npu_ge`: the npu_ge backend build, test-double model repositories, Triton calls.
- `stack`: `geadmin up` as a subprocess on free ports.
- `tiers`: tier markers and the guard against unmarked servers.
- `hypothesis_profiles`: the fast and full property-test profiles.
"""
