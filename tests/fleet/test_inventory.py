"""Target sources: Ansible INI/YAML inventories and ssh config aliases (pure parsing)."""

from __future__ import annotations

import pytest

from inferfit.inventory import (
    FleetTarget,
    InventoryError,
    expand_host_pattern,
    hosts_from_ssh_config,
    load_inventory,
    parse_ini_inventory,
    ssh_pattern_match,
    targets_from_args,
)

INI = """\
# comment
loose.nonexistent.invalid

[gpu]
gpu[01:03].nonexistent.invalid
golden ansible_host=127.0.0.5 ansible_port=2222 ansible_user=root
box:2201

[gpu:vars]
ansible_user=ops
ansible_ssh_private_key_file=/keys/gpu

[edge]
edge-[a:b] ansible_connection=local

[fleet:children]
gpu
edge

[all:vars]
ansible_user=nobody
ansible_port=22
"""


def test_ini_hosts_groups_ranges_and_vars_precedence():
    targets = {t.name: t for t in parse_ini_inventory(INI, "inv.ini").targets()}
    assert list(targets) == [
        "loose.nonexistent.invalid", "gpu01.nonexistent.invalid", "gpu02.nonexistent.invalid",
        "gpu03.nonexistent.invalid", "golden", "box", "edge-a", "edge-b",
    ]
    # all:vars < group vars < host vars
    assert targets["loose.nonexistent.invalid"] == FleetTarget(
        "loose.nonexistent.invalid", "loose.nonexistent.invalid", 22, "nobody", None,
        ("ungrouped",))
    g2 = targets["gpu02.nonexistent.invalid"]
    assert (g2.user, g2.port, g2.identity_file) == ("ops", 22, "/keys/gpu")
    assert set(g2.groups) == {"gpu", "fleet"}
    golden = targets["golden"]
    assert (golden.host, golden.port, golden.user) == ("127.0.0.5", 2222, "root")
    assert golden.target == "root@127.0.0.5:2222"
    # host:port in the inventory line, as Ansible allows
    assert (targets["box"].host, targets["box"].port) == ("box", 2201)
    assert targets["edge-a"].host is None
    assert targets["edge-a"].target is None


def test_ini_limit_by_group_or_host_pattern():
    inv = parse_ini_inventory(INI)
    assert [t.name for t in inv.targets("edge")] == ["edge-a", "edge-b"]
    assert [t.name for t in inv.targets("gpu0*")] == [
        "gpu01.nonexistent.invalid", "gpu02.nonexistent.invalid", "gpu03.nonexistent.invalid"]
    assert [t.name for t in inv.targets("fleet,!gpu")] == ["edge-a", "edge-b"]


def test_yaml_inventory(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text("""\
all:
  vars:
    ansible_user: ops
  children:
    gpu:
      hosts:
        gpu[1:2]:
          ansible_port: 2200
        golden:
          ansible_host: 127.0.0.7
      vars:
        ansible_ssh_private_key_file: ~/.ssh/gpu
    cpu:
      hosts:
        cpu1:
""")
    targets = {t.name: t for t in load_inventory(path)}
    assert list(targets) == ["gpu1", "gpu2", "golden", "cpu1"]
    assert targets["gpu2"].target == "ops@gpu2:2200"
    assert targets["golden"].host == "127.0.0.7"
    assert targets["golden"].identity_file is not None
    assert targets["golden"].identity_file.endswith("/.ssh/gpu")
    assert targets["cpu1"].identity_file is None
    assert [t.name for t in load_inventory(path, limit="cpu")] == ["cpu1"]


def test_host_ranges():
    assert expand_host_pattern("n[08:10]") == ["n08", "n09", "n10"]
    assert expand_host_pattern("n[0:10:5]") == ["n0", "n5", "n10"]
    assert expand_host_pattern("r[a:c]x[1:2]") == ["rax1", "rax2", "rbx1", "rbx2", "rcx1", "rcx2"]
    with pytest.raises(InventoryError, match="range end before start"):
        expand_host_pattern("n[5:1]")


@pytest.mark.parametrize(("text", "message"), [
    ("[gpu\nbox\n", "inv.ini:1: unclosed section header"),
    ("[gpu:weird]\n", "inv.ini:1: unknown section"),
    ("[gpu]\nbox ansible_port\n", "inv.ini:2: expected key=value"),
    ("[gpu:vars]\njust_a_word\n", "inv.ini:2: expected key=value"),
])
def test_ini_errors_name_file_and_line(text, message):
    with pytest.raises(InventoryError, match=message):
        parse_ini_inventory(text, "inv.ini")


def test_yaml_errors(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("all:\n  hosts: [a, b]\n")
    with pytest.raises(InventoryError, match=r"all.hosts must be a mapping"):
        load_inventory(path)
    path.write_text("all: [\n")
    with pytest.raises(InventoryError, match="not valid YAML"):
        load_inventory(path)


def test_ssh_config_aliases_and_patterns(tmp_path):
    inc = tmp_path / "more.conf"
    inc.write_text("Host gpu-9\n  HostName 127.0.0.9\n")
    cfg = tmp_path / "config"
    cfg.write_text(f"""\
Host gpu-1 gpu-2
    HostName 127.0.0.1
Host=gpu-3
    Port 2222
Host *.nonexistent.invalid !skip gpu-*
    User ops
Host bastion
    HostName 127.0.0.2
Include {inc}
""")
    assert [t.name for t in hosts_from_ssh_config(cfg, "gpu-*")] == [
        "gpu-1", "gpu-2", "gpu-3", "gpu-9"]
    assert [t.name for t in hosts_from_ssh_config(cfg, "gpu-*,!gpu-2")] == [
        "gpu-1", "gpu-3", "gpu-9"]
    assert [t.name for t in hosts_from_ssh_config(cfg, "bastion")] == ["bastion"]
    assert ssh_pattern_match("gpu-?", "gpu-1")
    assert not ssh_pattern_match("gpu-?", "gpu-10")


def test_targets_from_args_keep_names_unique():
    ts = targets_from_args(["box", "ops@127.0.0.1:2201", "127.0.0.1:2202", "box"])
    assert [t.name for t in ts] == ["box", "ops@127.0.0.1:2201", "127.0.0.1:2202"]
    assert ts[1].target == "ops@127.0.0.1:2201"
