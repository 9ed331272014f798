"""inferfit: is this AI-inference box fit for the workload?"""

from __future__ import annotations

__version__ = "0.1.0"
TOOL = f"inferfit {__version__}"
