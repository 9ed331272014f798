#!/usr/bin/env bash
# Set up inferfit on a fresh Debian machine (as root): system tools the probes
# and tests drive, then a virtualenv in .venv with inferfit and its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
# gcc (and libc6-dev) build the nginx probe's C scanner at install time.
for pair in gcc:gcc gcc:libc6-dev sshd:openssh-server ssh:openssh-client ssh-keygen:openssh-client fio:fio \
            nginx:nginx goaccess:goaccess tmux:tmux ip:iproute2 ping:iputils-ping curl:curl; do
  bin=${pair%%:*}; pkg=${pair#*:}
  command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] || need+=("$pkg")
done
PY=${PYTHON:-python3}
inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null || true)
[ -n "$inc" ] && [ ! -f "$inc/Python.h" ] && need+=(python3-dev)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
  else
    echo "setup: missing packages (install as root): ${need[*]}" >&2
  fi
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip setuptools wheel >/dev/null
# setuptools' build warnings (experimental ext-modules table, data folders) are noise here
PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -e '.[test]' --config-settings editable_mode=strict
if ! (cd / && "$OLDPWD/.venv/bin/python" -c \
      'from inferfit.probes import nginx_native as n; raise SystemExit(not n.available())'); then
  echo "setup: the nginx C scanner did not build (gcc, libc6-dev and Python's headers are needed);" \
       "inferfit works without it, at pure-Python speed" >&2
fi
