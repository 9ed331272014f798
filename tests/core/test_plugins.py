"""Plugin system: built-ins, third-party entry points, blocking, broken plugins."""

from __future__ import annotations

import inspect
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from inferfit import hookspecs
from inferfit.manager import Registry, make_plugin_manager

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip-install the two test plugin packages into a private target dir."""
    site = tmp_path_factory.mktemp("site")
    for pkg in ("sample_plugin", "broken_plugin"):
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
             "--target", str(site), str(HERE / "plugins" / pkg)],
            check=True, capture_output=True,
        )
    return site


def test_builtins_register_system_probe() -> None:
    reg = Registry.collect(make_plugin_manager(load_entry_points=False))
    assert "system" in reg.probes


def test_every_hookspec_is_documented_and_implemented_by_a_builtin() -> None:
    pm = make_plugin_manager(load_entry_points=False)
    specs = [name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
             if name.startswith("inferfit_")]
    assert specs, "no hookspecs found"
    for name in specs:
        assert inspect.getdoc(getattr(hookspecs, name)), f"{name} has no docstring"
    from inferfit.tui.plugins import register_ui_plugins

    register_ui_plugins(pm)
    implemented = {name for info in pm.describe() for name in info.hooks}
    assert set(specs) <= implemented, f"hooks without a built-in: {set(specs) - implemented}"


def test_third_party_plugin_is_listed_and_runs(plugin_site: Path, inferfit_cli, sshd,
                                               tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(plugin_site)}
    listed = inferfit_cli("plugins", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "sample  [entry point (inferfit-sample-plugin 0.0.1)]" in listed.stdout
    assert "inferfit_register_probes" in listed.stdout.split("sample  [", 1)[1]
    # the broken plugin is reported and skipped; everything else still loads
    assert "broken  [entry point (inferfit-broken-plugin 0.0.2)]  FAILED TO LOAD" in listed.stdout
    assert "libfoo" in listed.stdout
    assert "kernel_release" in listed.stdout
    # the console's built-in panels are listed too, with their hook
    ui = listed.stdout.split("inferfit.tui.builtin  [built-in (console)]", 1)[1]
    assert ui.splitlines()[1].strip() == "inferfit_register_panels"
    panels = next(li for li in listed.stdout.splitlines() if li.startswith("panels:"))
    assert "gpu" in panels
    assert "system" in panels
    out = tmp_path / "f.toml"
    run = inferfit_cli("check", "--probe", "kernel_release", "--export", str(out), *sshd.cli(),
                       env=env)
    assert run.returncode == 0, run.stderr
    release = subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip()
    assert tomllib.loads(out.read_text())["probes"]["kernel_release"]["release"] == release


def test_disable_env_blocks_plugins(plugin_site: Path, inferfit_cli) -> None:
    env = {"PYTHONPATH": str(plugin_site), "INFERFIT_DISABLE_PLUGINS": "sample,broken"}
    listed = inferfit_cli("plugins", env=env)
    assert listed.returncode == 0
    assert "inferfit_sample" not in listed.stdout
    assert "sample  [" not in listed.stdout
    assert "FAILED" not in listed.stdout
    blocked = inferfit_cli("check", "--probe", "kernel_release", env=env)
    assert blocked.returncode == 3
    assert "unknown probe 'kernel_release'" in blocked.stderr


def test_bare_probes_package_does_not_resolve(tmp_path: Path) -> None:
    """Installed names are namespaced: `import probes` must not find our folder."""
    code = (
        "import importlib.util as u, sys\n"
        "assert u.find_spec('probes') is None, 'bare probes resolves'\n"
        "assert u.find_spec('tui') is None and u.find_spec('plugins') is None\n"
        "import inferfit.probes.system, inferfit.configs\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_pyproject_maps_folders_to_namespaced_packages() -> None:
    meta = tomllib.loads((HERE.parent.parent / "pyproject.toml").read_text())
    mapping = meta["tool"]["setuptools"]["package-dir"]
    assert mapping["inferfit.probes"] == "probes"
    assert mapping["inferfit.tui"] == "tui"
    assert mapping["inferfit.plugins"] == "plugins"
    assert mapping["inferfit.configs"] == "configs"
    assert meta["project"]["scripts"]["inferfit"] == "inferfit.cli:main"
