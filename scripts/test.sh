#!/usr/bin/env bash
# The whole test suite: set up (idempotent), lint, type-check, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/pytest "$@"
