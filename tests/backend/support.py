"""Moved to tests/support/npu_ge.py; kept for imports in flight."""

from tests.support.npu_ge import *  # noqa: F403
from tests.support.npu_ge import LIVE_RESOURCE_KEYS, REPO_ROOT, BackendBuild  # noqa: F401
