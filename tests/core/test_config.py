"""Layered config: defaults, user dir, --config, CLI flags; errors name file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferfit.config import Config, ConfigError


def test_layers_and_provenance(home: Path, tmp_path: Path) -> None:
    user = home / ".config" / "inferfit" / "config.toml"
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text("[ssh]\nconnect_timeout_s = 3\n[probes.system]\nfree_gib_warn = 5.0\n")
    extra = tmp_path / "extra.toml"
    extra.write_text("[probes.system]\nfree_gib_warn = 7.5\n")
    cfg = Config.load(extra, {"check.probe_timeout_s": 30.0}, include_project=False)
    assert cfg.get("ssh.connect_timeout_s") == 3
    assert cfg.origin("ssh.connect_timeout_s") == str(user)
    assert cfg.get("probes.system.free_gib_warn") == 7.5
    assert cfg.origin("probes.system.free_gib_warn") == str(extra)
    assert cfg.get("check.probe_timeout_s") == 30.0
    assert cfg.origin("check.probe_timeout_s") == "command line"
    assert cfg.origin("ssh.keepalive_s").startswith("defaults")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[ssh]\nconect_timeout_s = 3\n", "unknown key 'ssh.conect_timeout_s'"),
        ("[ssh]\nconnect_timeout_s = 'fast'\n", "'ssh.connect_timeout_s' must be a number"),
        ("[probes.system]\npaths = '/'\n", "'probes.system.paths' must be an array"),
        ("ssh = 3\n", "'ssh' must be a table"),
        ("[ssh\n", "not valid TOML"),
    ],
)
def test_invalid_files_name_file_and_key(tmp_path: Path, home: Path, text: str,
                                         message: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(ConfigError, match=message) as err:
        Config.load(bad, include_project=False)
    assert str(bad) in str(err.value)


def test_config_show_cli(inferfit_cli, tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("[ssh]\nkeepalive_s = 5\n")
    r = inferfit_cli("config", "show", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    line = next(li for li in r.stdout.splitlines() if li.startswith("ssh.keepalive_s"))
    assert "5" in line
    assert str(cfg) in line
    bad = tmp_path / "bad.toml"
    bad.write_text("[ssh]\nnope = 1\n")
    r = inferfit_cli("check", "--config", str(bad))
    assert r.returncode == 3
    assert "unknown key 'ssh.nope'" in r.stderr
    assert str(bad) in r.stderr


def test_every_probe_table_accepts_timeout_s(tmp_path: Path, home: Path) -> None:
    cfg = tmp_path / "t.toml"
    cfg.write_text("[probes.system]\ntimeout_s = 5\n")
    assert Config.load(cfg, include_project=False).probe_options("system")["timeout_s"] == 5
    cfg.write_text("[probes.system]\ntimeout_s = 'soon'\n")
    with pytest.raises(ConfigError, match=r"'probes\.system\.timeout_s' must be a number"):
        Config.load(cfg, include_project=False)
