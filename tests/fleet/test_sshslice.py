"""Per-host ssh config slices resolve every option exactly as the full file does."""

from __future__ import annotations

from pathlib import Path

import pytest
from asyncssh.config import SSHClientConfig

from inferfit.sshslice import ConfigSlicer

OPTIONS = ("Hostname", "Port", "User", "IdentityFile", "UserKnownHostsFile",
           "StrictHostKeyChecking", "ConnectTimeout", "ProxyJump", "IdentitiesOnly")


def resolve(path: str, host: str) -> dict[str, object]:
    cfg = SSHClientConfig.load(None, [Path(path)], False, False, False, "me", "", host, 22)
    return {o: cfg.get(o) for o in OPTIONS}


@pytest.fixture
def ssh_config(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    inc = tmp_path / ".ssh" / "fleet.conf"
    inc.write_text("Host gpu-9\n    HostName 127.0.0.9\n    Port 2209\n")
    cfg = tmp_path / "config"
    cfg.write_text(f"""\
ConnectTimeout 7
Include fleet.conf
Host gpu-1 gpu-2
    HostName 127.0.0.1
    User ops
Host=gpu-3
    Port 2222
Host gpu-* !gpu-2
    User fallback
    IdentityFile ~/.ssh/gpu
Match user me
    StrictHostKeyChecking yes
Host *
    Port 2200
    ProxyJump bastion
    UserKnownHostsFile {tmp_path}/known
""")
    return cfg


@pytest.mark.parametrize("host", ["gpu-1", "gpu-2", "gpu-3", "gpu-9", "other", "127.0.0.1"])
def test_slice_resolves_like_the_full_file(ssh_config, host):
    slicer = ConfigSlicer(ssh_config)
    try:
        sliced = slicer.config_for(host)
        assert sliced != str(ssh_config)
        assert resolve(sliced, host) == resolve(str(ssh_config), host)
        assert len(Path(sliced).read_text().splitlines()) < 20
    finally:
        slicer.close()
    assert not Path(sliced).exists()


def test_unsliceable_configs_use_the_full_file(tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text("Host a\n    Include other.conf\nHost b\n    Port 1\n")
    assert ConfigSlicer(cfg).config_for("a") == str(cfg)
    cfg.write_text("CanonicalizeHostname yes\nHost a\n    Port 1\n")
    assert ConfigSlicer(cfg).config_for("a") == str(cfg)
    assert ConfigSlicer(None).config_for("a") is None
    assert ConfigSlicer(tmp_path / "missing").config_for("a") == str(tmp_path / "missing")
