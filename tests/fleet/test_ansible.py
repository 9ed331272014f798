"""The Ansible path end to end: ansible-playbook runs configs/ansible/inferfit-check.yml
against the real loopback sshd (the "remote" boxes are this machine), the headless check
runs in local mode on each box, the findings are fetched, then loaded and compared."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from inferfit.findings import Findings

REPO = Path(__file__).resolve().parent.parent.parent
PLAYBOOK = REPO / "configs" / "ansible" / "inferfit-check.yml"
BIN = Path(sys.executable).parent


def ansible_env(home: Path, tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(home),
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-local"),
        "ANSIBLE_REMOTE_TMP": str(tmp / "ansible-remote"),
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3",
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp / "cp"),
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }


def write_inventory(server, path: Path, names: list[str], inferfit_bin: str) -> None:  # type: ignore[no-untyped-def]
    ssh_args = (f"-o UserKnownHostsFile={server.known_hosts} -o StrictHostKeyChecking=yes "
                "-o IdentitiesOnly=yes")
    lines = ["[boxes]"]
    lines += [f"{n} ansible_host=127.0.0.1 ansible_port={server.port}" for n in names]
    lines += [
        "[all:vars]",
        f"ansible_user={server.user}",
        f"ansible_ssh_private_key_file={server.client_key}",
        f"ansible_ssh_common_args='{ssh_args}'",
        "ansible_python_interpreter=/usr/bin/python3",
        f"inferfit_bin={inferfit_bin}",
    ]
    path.write_text("\n".join(lines) + "\n")


def test_playbook_runs_check_on_each_box_and_fetches_findings(fleet_sshd, home, tmp_path,
                                                              inferfit_cli):
    inferfit_bin = shutil.which("inferfit", path=str(BIN))
    assert inferfit_bin, "inferfit console script not found next to the test interpreter"
    inv = tmp_path / "inventory.ini"
    names = ["node-a", "node-b", "node-c"]
    write_inventory(fleet_sshd, inv, names, inferfit_bin)
    fetched = tmp_path / "collected"
    extra = json.dumps({"inferfit_probes": ["system"], "inferfit_fetch_dir": str(fetched)})
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inv), str(PLAYBOOK), "-e", extra, "-f", "3"],
        capture_output=True, text=True, timeout=300, env=ansible_env(home, tmp_path),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "failed=0" in done.stdout
    assert "unreachable=0" in done.stdout
    files = sorted(p.name for p in fetched.iterdir())
    assert files == [f"{n}.toml" for n in names]
    loaded = [Findings.load(fetched / f) for f in files]
    for f in loaded:
        # The check ran on the box itself (local mode), not over SSH from the controller.
        assert f.target.transport == "local"
        assert f.probes["system"].status in ("ok", "warn")
    r = inferfit_cli("compare", str(fetched), "--json")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["labels"]) == 3
    # Three runs on the same machine: the hardware keys agree.
    rows = {row["key"]: row for row in doc["rows"]}
    assert not rows["target.cpu_cores"]["differs"]
    assert not rows["probes.system.memory_gib"]["differs"]
    r = inferfit_cli("export", "-f", "junit", str(fetched))
    assert r.returncode == 0
    assert r.stdout.count("<testsuite ") == 3


def test_playbook_fails_a_box_whose_check_could_not_run(fleet_sshd, home, tmp_path):
    inv = tmp_path / "inventory.ini"
    write_inventory(fleet_sshd, inv, ["node-x"], "/nonexistent/bin/inferfit")
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inv), str(PLAYBOOK),
         "-e", json.dumps({"inferfit_fetch_dir": str(tmp_path / "collected")})],
        capture_output=True, text=True, timeout=300, env=ansible_env(home, tmp_path),
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert "failed=1" in done.stdout
    assert not (tmp_path / "collected" / "node-x.toml").exists()


def test_example_inventory_and_manifests_parse():
    from inferfit.inventory import load_inventory

    targets = {t.name: t for t in load_inventory(REPO / "configs" / "ansible" / "inventory.ini")}
    assert "gpu03.nonexistent.invalid" in targets
    assert targets["stage-a"].target == "ops@127.0.0.1:2222"
    play = yaml.safe_load(PLAYBOOK.read_text())
    tasks = [next(k for k in t if k.startswith("ansible.builtin.")) for t in play[0]["tasks"]]
    assert tasks == ["ansible.builtin.tempfile", "ansible.builtin.command",
                     "ansible.builtin.fetch", "ansible.builtin.file"]
    job = yaml.safe_load((REPO / "configs" / "k8s" / "job.yaml").read_text())
    assert job["kind"] == "Job"
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["inferfit", "check"]
    assert "--export" in container["args"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    ds = yaml.safe_load((REPO / "configs" / "k8s" / "daemonset.yaml").read_text())
    assert ds["kind"] == "DaemonSet"
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert "inferfit check" in spec["initContainers"][0]["command"][2]
    assert ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]
