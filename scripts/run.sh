#!/usr/bin/env bash
# Set up (idempotent) and run inferfit; with no arguments it opens the console
# on this machine. Any arguments go to inferfit (e.g. `check`, `user@host`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/inferfit "$@"
