#!/usr/bin/env bash
# Set up inferfit on a fresh Debian machine (as root): system tools the probes
# and tests drive, then a virtualenv in .venv with inferfit and its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for pair in sshd:openssh-server ssh:openssh-client ssh-keygen:openssh-client fio:fio \
            nginx:nginx goaccess:goaccess tmux:tmux ip:iproute2 ping:iputils-ping curl:curl; do
  bin=${pair%%:*}; pkg=${pair#*:}
  command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
  else
    echo "setup: missing packages (install as root): ${need[*]}" >&2
  fi
fi
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip setuptools wheel >/dev/null
.venv/bin/python -m pip install -q -e '.[test]' --config-settings editable_mode=strict
