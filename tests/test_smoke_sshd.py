from __future__ import annotations

import tomllib


def test_check_system_over_real_sshd(sshd, inferfit_cli, tmp_path):
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "system", "--export", str(out), *sshd.cli())
    assert r.returncode == 0, r.stderr
    doc = tomllib.loads(out.read_text())
    assert doc["probes"]["system"]["cpu_cores"] >= 1
