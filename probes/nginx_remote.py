"""The self-contained script sent to the box's ``python3`` on stdin.

It is built from the source of ``nginx_format``, ``nginx_values``, ``nginx_agg``
and ``nginx_scan`` (the same code the tests import), so only aggregates cross the
network. Options travel as one JSON argument (``python3 - '{...}'``), never pasted into the script.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

MODULES = ("nginx_format.py", "nginx_values.py", "nginx_agg.py", "nginx_scan.py")

MAIN = r'''

def _main():
    import json
    import sys
    opts = json.loads(sys.argv[1])
    try:
        lf = LogFormat(opts["format"], opts.get("escape", "default"), opts.get("name", ""))
        out = aggregate_file(opts["path"], lf, opts.get("window_s"), opts.get("since"),
                             opts.get("until"), opts.get("workers"))
    except FormatError as exc:
        out = {"error": "bad_format", "message": str(exc)}
    except PermissionError as exc:
        out = {"error": "permission_denied", "message": str(exc)}
    except FileNotFoundError as exc:
        out = {"error": "not_found", "message": str(exc)}
    except OSError as exc:
        out = {"error": "unreadable", "message": str(exc)}
    out["python"] = sys.version.split()[0]
    sys.stdout.write(json.dumps(out) + "\n")


_main()
'''


@lru_cache(maxsize=1)
def script() -> str:
    """The whole program: both modules (their cross-imports dropped) and ``_main``."""
    parts = ["from __future__ import annotations\n"]
    for name in MODULES:
        src = resources.files("inferfit.probes").joinpath(name).read_text("utf-8")
        kept: list[str] = []
        skipping = False  # inside a parenthesized `from inferfit... import (` block
        for line in src.splitlines():
            if skipping:
                skipping = not line.startswith(")")
                continue
            if line.startswith("from inferfit."):
                skipping = line.rstrip().endswith("(")
                continue
            if not line.startswith("from __future__ import"):
                kept.append(line)
        parts.append("\n".join(kept))
    parts.append(MAIN)
    return "\n".join(parts)


def argv(options: dict[str, Any]) -> list[str]:
    """The command that runs the script: ``python3 - JSON`` (the script goes on stdin)."""
    return ["python3", "-", json.dumps(options, separators=(",", ":"))]
