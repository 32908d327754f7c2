"""geadmin: control panel for Triton Inference Server on Ascend NPUs."""

from __future__ import annotations

__version__ = "0.1.0"
