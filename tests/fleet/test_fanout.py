"""Fleet mode of `inferfit check` against the real loopback sshd: many aliases, some broken."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import tomli_w

from inferfit.findings import Findings


def test_fanout_writes_good_boxes_and_reports_bad_ones(fleet_ssh_config, inferfit_cli, tmp_path):
    out = tmp_path / "out"
    r = inferfit_cli("check", "-F", str(fleet_ssh_config.path), "--hosts-from-ssh-config", "*",
                     "--probe", "system", "--export-dir", str(out), "--max-parallel", "4",
                     "--json")
    assert r.returncode == 3, r.stderr  # worst box: could not connect
    doc = json.loads(r.stdout)
    rows = {h["host"]: h for h in doc["hosts"]}
    assert sorted(rows) == sorted(fleet_ssh_config.all)
    for name in fleet_ssh_config.good:
        path = out / f"{name}.toml"
        f = Findings.load(path)
        assert f.target.name == name
        assert f.probes["system"].status in ("ok", "warn")
        assert f.target.facts["cpu_cores"] >= 1
        assert rows[name]["status"] == f.status
        assert rows[name]["exit_code"] in (0, 1)
        assert rows[name]["disk"].endswith("GiB free")
    for name in fleet_ssh_config.closed:
        assert rows[name]["status"] == "unreachable"
        assert "connection refused" in rows[name]["reason"]
        assert rows[name]["exit_code"] == 3
    evil = rows["evil01"]
    assert evil["status"] == "unreachable"
    assert evil["reason"].startswith("host_key_changed:")
    # The broken boxes get a findings file too, saying why, so exports and compare see them.
    bad = tomllib.loads((out / "evil01.toml").read_text())
    assert bad["probes"]["connect"]["status"] == "error"
    assert bad["probes"]["connect"]["error_kind"] == "host_key_changed"
    assert "ssh-keygen -R" in bad["probes"]["connect"]["fix"]
    assert len(list(out.glob("*.toml"))) == len(fleet_ssh_config.all)
    # stderr reports each box as it finishes, with the reason for the bad ones.
    assert "down01: could not check: unreachable: connection refused" in r.stderr
    assert f"[{len(fleet_ssh_config.all)}/{len(fleet_ssh_config.all)}]" in r.stderr


def test_fanout_summary_table_and_exit_code_of_good_boxes(fleet_ssh_config, inferfit_cli,
                                                          tmp_path):
    out = tmp_path / "out"
    r = inferfit_cli("check", "-q", "-F", str(fleet_ssh_config.path), "--probe", "system",
                     "--export-dir", str(out), *fleet_ssh_config.good[:3],
                     env={"COLUMNS": "200"})
    statuses = [Findings.load(out / f"{n}.toml").status for n in fleet_ssh_config.good[:3]]
    assert r.returncode == max({"ok": 0, "warn": 1}[s] for s in statuses), r.stderr
    assert r.stderr == ""
    for name in fleet_ssh_config.good[:3]:
        line = next(ln for ln in r.stdout.splitlines() if f" {name} " in ln)
        assert "GiB free" in line
        assert ("fit" in line) or ("review" in line)
    assert "host" in r.stdout
    assert "worst region p95" in r.stdout
    assert "verdict" in r.stdout
    assert "3 boxes:" in r.stdout
    assert f"3 findings files in {out}" in r.stdout


def test_one_failure_never_stops_the_others_even_at_parallel_one(fleet_ssh_config,
                                                                 inferfit_cli, tmp_path):
    out = tmp_path / "out"
    targets = ["down01", "box01", "evil01", "box02"]
    r = inferfit_cli("check", "-q", "-F", str(fleet_ssh_config.path), "--probe", "system",
                     "--export-dir", str(out), "--max-parallel", "1", *targets,
                     env={"COLUMNS": "250"})
    assert r.returncode == 3
    assert Findings.load(out / "box01.toml").probes["system"].status in ("ok", "warn")
    assert Findings.load(out / "box02.toml").probes["system"].status in ("ok", "warn")
    assert "down01: could not check: unreachable" in r.stdout
    assert "evil01: could not check: host_key_changed" in r.stdout


def test_inventory_ini_over_real_sshd(fleet_sshd, inferfit_cli, tmp_path):
    # The inventory carries address, port, user and key; the ssh config only says
    # which known_hosts to trust for 127.0.0.1 (as a user's ~/.ssh/config would).
    ssh_cfg = tmp_path / "ssh_config"
    ssh_cfg.write_text(f"Host 127.0.0.1\n    UserKnownHostsFile {fleet_sshd.known_hosts}\n"
                       "    StrictHostKeyChecking yes\n    IdentitiesOnly yes\n")
    inv = tmp_path / "inv.ini"
    inv.write_text(
        "[gpu]\n"
        f"gpu[01:03] ansible_host=127.0.0.1 ansible_port={fleet_sshd.port}\n"
        "[cpu]\n"
        f"cpu01 ansible_host=127.0.0.1 ansible_port={fleet_sshd.port}\n"
        "[all:vars]\n"
        f"ansible_user={fleet_sshd.user}\n"
        f"ansible_ssh_private_key_file={fleet_sshd.client_key}\n"
    )
    out = tmp_path / "out"
    r = inferfit_cli("check", "-q", "-F", str(ssh_cfg), "--inventory", str(inv),
                     "--limit", "gpu", "--probe", "system", "--export-dir", str(out), "--json")
    assert r.returncode in (0, 1), r.stdout + r.stderr
    hosts = [h["host"] for h in json.loads(r.stdout)["hosts"]]
    assert hosts == ["gpu01", "gpu02", "gpu03"]
    assert sorted(p.name for p in out.iterdir()) == ["gpu01.toml", "gpu02.toml", "gpu03.toml"]
    f = Findings.load(out / "gpu02.toml")
    assert f.target.name == "gpu02"
    assert f.target.address == f"{fleet_sshd.user}@127.0.0.1:{fleet_sshd.port}"


def test_fleet_refuses_single_export_file_and_bad_inventory(inferfit_cli, tmp_path: Path):
    r = inferfit_cli("check", "a.nonexistent.invalid", "b.nonexistent.invalid",
                     "--export", "x.toml")
    assert r.returncode == 3
    assert "--export-dir" in r.stderr
    inv = tmp_path / "inv.ini"
    inv.write_text("[gpu]\nbox ansible_port=notaport\n")
    r = inferfit_cli("check", "--inventory", str(inv))
    assert r.returncode == 3
    assert "ansible_port 'notaport' is not a number" in r.stderr
    r = inferfit_cli("check", "--hosts-from-ssh-config", "gpu-*", "-F", str(inv))
    assert r.returncode == 3
    assert "inv.ini:1: cannot parse '[gpu]'" in r.stderr
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host cpu-1\n    HostName 127.0.0.1\n")
    r = inferfit_cli("check", "--hosts-from-ssh-config", "gpu-*", "-F", str(cfg))
    assert r.returncode == 3
    assert "no Host alias matches 'gpu-*'" in r.stderr


def test_fleet_with_a_workload_sizes_every_box(fleet_ssh_config, inferfit_cli, tmp_path):
    workload = Path(__file__).resolve().parents[2] / "configs" / "workloads" / "nightly-batch.toml"
    out = tmp_path / "out"
    r = inferfit_cli("check", "-q", "-F", str(fleet_ssh_config.path), "--probe", "system",
                     "--workload", str(workload), "--export-dir", str(out), "--json",
                     "box01", "box02")
    assert r.returncode != 3, r.stderr
    rows = {h["host"]: h for h in json.loads(r.stdout)["hosts"]}
    for name in ("box01", "box02"):
        sizing = Findings.load(out / f"{name}.toml").sizing
        assert sizing is not None
        assert sizing["mode"] in ("realtime", "batch", "mixed", "split")
        assert rows[name]["verdict"] == sizing["mode"]


def test_hundred_boxes_from_an_inventory_then_compare_finds_the_odd_one(
        fleet_sshd, inferfit_cli, tmp_path):
    # The "done when": --inventory over 100 loopback targets writes 100 files
    # and a summary; compare over the directory picks out the box that differs.
    ssh_cfg = tmp_path / "ssh_config"
    ssh_cfg.write_text(f"Host 127.0.0.1\n    UserKnownHostsFile {fleet_sshd.known_hosts}\n"
                       "    StrictHostKeyChecking yes\n    IdentitiesOnly yes\n")
    inv = tmp_path / "inv.ini"
    inv.write_text(
        f"[gpu]\nbox[001:100] ansible_host=127.0.0.1 ansible_port={fleet_sshd.port}\n"
        f"[gpu:vars]\nansible_user={fleet_sshd.user}\n"
        f"ansible_ssh_private_key_file={fleet_sshd.client_key}\n")
    out = tmp_path / "out"
    r = inferfit_cli("check", "-q", "-F", str(ssh_cfg), "--inventory", str(inv),
                     "--probe", "system", "--export-dir", str(out), "--json", timeout=600)
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr
    hosts = json.loads(r.stdout)["hosts"]
    assert [h["host"] for h in hosts] == [f"box{i:03d}" for i in range(1, 101)]
    assert len(list(out.glob("box*.toml"))) == 100
    odd = tomllib.loads((out / "box042.toml").read_text())
    odd["target"]["cpu_cores"] = odd["probes"]["system"]["cpu_cores"] = 512
    (out / "box042.toml").write_text(tomli_w.dumps(odd))
    r = inferfit_cli("compare", str(out), "--only-diff", "--no-summary", "--json")
    assert r.returncode == 1
    odd_ones = json.loads(r.stdout)["odd_ones"]
    assert {"target.cpu_cores", "probes.system.cpu_cores"} <= set(odd_ones["box042"])
    # (a busy machine may flip another box's load warning: never by as many keys)
    assert all(len(keys) < len(odd_ones["box042"])
               for name, keys in odd_ones.items() if name != "box042")
