"""`inferfit check` end to end through a real sshd, as a user runs it."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from inferfit.findings import Findings


def test_check_exports_real_system_values(sshd, inferfit_cli, tmp_path: Path) -> None:
    out = tmp_path / "findings.toml"
    r = inferfit_cli("check", "--probe", "system", "--export", str(out), *sshd.cli())
    assert r.returncode == 0, r.stderr
    assert "system" in r.stdout
    assert "ok" in r.stdout
    assert "findings written to" in r.stderr
    doc = tomllib.loads(out.read_text())
    assert doc["schema_version"] == 1
    assert doc["tool"].startswith("inferfit ")
    assert doc["target"]["transport"] == "ssh"
    system = doc["probes"]["system"]
    assert system["status"] == "ok"
    assert system["cpu_cores"] == os.cpu_count()
    with open("/proc/meminfo") as fh:
        mem_kib = int(fh.readline().split()[1])
    assert abs(system["memory_gib"] - mem_kib / 1024 / 1024) < 0.01
    assert system["kernel"].split()[1] == os.uname().release
    assert system["tools"]["fio"] is True
    assert any(fs["mount"] == "/" for fs in system["filesystems"])
    assert doc["target"]["cpu_cores"] == os.cpu_count()
    # loads back into an equal model
    again = Findings.load(out)
    assert again.to_dict() == doc


def test_check_json_on_stdout(sshd, inferfit_cli) -> None:
    r = inferfit_cli("check", "--probe", "system", "--json", "-q", *sshd.cli())
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert doc["probes"]["system"]["status"] == "ok"
    assert r.stderr == ""


def test_target_with_user_host_port_and_identity(sshd, inferfit_cli, home: Path) -> None:
    (home / ".ssh" / "known_hosts").write_text(sshd.host_key_line + "\n")
    r = inferfit_cli("check", "--probe", "system", "-i", str(sshd.client_key),
                     f"{sshd.user}@127.0.0.1:{sshd.port}")
    assert r.returncode == 0, r.stderr
    r = inferfit_cli("check", "--probe", "system", "-i", str(sshd.client_key),
                     "-p", str(sshd.port), f"{sshd.user}@127.0.0.1")
    assert r.returncode == 0, r.stderr


def test_unknown_host_key_exit_3_with_fix(sshd, inferfit_cli, home: Path) -> None:
    r = inferfit_cli("check", "--probe", "system", "-i", str(sshd.client_key),
                     f"{sshd.user}@127.0.0.1:{sshd.port}")
    assert r.returncode == 3
    assert "could not check" in r.stderr
    assert "--accept-new-host-key" in r.stderr
    r = inferfit_cli("check", "--probe", "system", "--accept-new-host-key", "-i",
                     str(sshd.client_key), f"{sshd.user}@127.0.0.1:{sshd.port}")
    assert r.returncode == 0, r.stderr
    assert f"[127.0.0.1]:{sshd.port} ssh-ed25519" in (home / ".ssh" / "known_hosts").read_text()


def test_unreachable_exit_3(inferfit_cli) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = inferfit_cli("check", f"127.0.0.1:{port}")
    assert r.returncode == 3
    assert "connection refused" in r.stderr
    assert "fix:" in r.stderr


def test_unknown_probe_and_bad_target(inferfit_cli) -> None:
    r = inferfit_cli("check", "--probe", "nope")
    assert r.returncode == 3
    assert "unknown probe 'nope'" in r.stderr
    assert "system" in r.stderr
    r = inferfit_cli("check", "host:notaport")
    assert r.returncode == 3
    assert "bad target" in r.stderr


def test_local_check_without_target(inferfit_cli, tmp_path: Path) -> None:
    out = tmp_path / "local.json"
    r = inferfit_cli("check", "--probe", "system", "--export", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["target"]["transport"] == "local"
    assert doc["probes"]["system"]["cpu_cores"] == os.cpu_count()


def test_warn_exit_code_from_thresholds(sshd, inferfit_cli, tmp_path: Path) -> None:
    cfg = tmp_path / "strict.toml"
    cfg.write_text("[probes.system]\npaths = [\"/\"]\nfree_gib_warn = 1e9\n")
    r = inferfit_cli("check", "--probe", "system", "--config", str(cfg), *sshd.cli())
    assert r.returncode == 1, r.stdout + r.stderr
    assert "GiB free on /" in r.stdout


def test_help_documents_exit_codes(inferfit_cli) -> None:
    r = inferfit_cli("check", "--help")
    assert r.returncode == 0
    assert "3 could not check" in r.stdout.replace("\n", " ").replace("  ", " ")


def test_summary_shows_config_syntax_verbatim(inferfit_cli) -> None:
    """A summary that quotes [[regions]] must not be eaten as terminal markup."""
    r = inferfit_cli("check", "--probe", "latency", "-q", env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "add [[regions]] with targets" in r.stdout


def test_export_to_unwritable_path_says_why(inferfit_cli, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    r = inferfit_cli("check", "--probe", "system", "-q", "--export", str(blocker / "f.toml"))
    assert r.returncode == 3
    assert f"cannot write {blocker / 'f.toml'}" in r.stderr
    assert blocker.read_text() == "x"
