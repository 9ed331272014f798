"""The headless side never imports textual: check, the plugin manager, and the CLI parser."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r"""
import sys
import inferfit.cli.check
from inferfit.manager import Registry, make_plugin_manager
reg = Registry.collect(make_plugin_manager())
assert "system" in reg.probes, reg.probes
from inferfit.cli import main
code = main(["check", "--probe", "system", "--quiet", "--json"])
loaded = sorted(m for m in sys.modules if m == "textual" or m.startswith("textual."))
print("TEXTUAL:", ",".join(loaded) or "none", "EXIT:", code, file=sys.stderr)
"""


def test_check_never_imports_textual(home: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("TEXTUAL: none EXIT: "), done.stderr[-2000:]
    assert '"system"' in done.stdout  # the check really ran and printed findings


def test_console_registry_adds_the_builtin_panels_only_there() -> None:
    from inferfit.cli.console import console_registry
    from inferfit.manager import Registry, make_plugin_manager

    plain = Registry.collect(make_plugin_manager())
    assert "inferfit.tui.builtin" not in dict(make_plugin_manager().list_name_plugin())
    pm, reg = console_registry()
    assert pm.sources["inferfit.tui.builtin"] == "built-in (console)"
    for name in ("system", "gpu", "disk", "latency", "nginx", "sizing"):
        assert name in reg.panels, name
        assert reg.panels[name].probe_name == name
    assert set(plain.probes) == set(reg.probes)


def test_disabling_the_panel_plugin_leaves_the_generic_panel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("INFERFIT_DISABLE_PLUGINS", "builtin")
    from inferfit.cli.console import console_registry

    _, reg = console_registry()
    assert reg.panels == {}
