"""End to end: `inferfit size` on recorded findings, `inferfit check --workload` over real SSH."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = REPO / "configs" / "workloads"
FIXTURES = REPO / "tests" / "fixtures" / "sizing"
HEADLINE = ("weights_bytes", "kv_bytes_per_token", "kv_budget_bytes", "max_tokens_in_cache",
            "max_concurrency")

# workload, findings, exit code, mode, actions
EXAMPLES = [
    ("realtime-chat-8b", "h100x8-box", 1, "realtime", ["scale_out", "move_closer"]),
    ("long-context-70b", "h100x8-box", 1, "realtime", ["scale_out", "throttle"]),
    ("nightly-batch", "h100x8-box", 0, "batch", []),
    ("mixed-deployment", "h100x8-box", 1, "mixed", ["reserve_realtime"]),
    ("mixed-deployment", "h100x8-mixed", 1, "split", ["split"]),
    ("long-context-70b", "l4x1-box", 2, "realtime", ["add_gpus"]),
    ("nightly-batch", "l4x1-box", 1, "batch", ["scale_out", "throttle"]),
]


def _size(cli: Callable[..., Any], workload: str, findings: str, out: Path) -> Any:
    return cli("size", "--workload", str(WORKLOADS / f"{workload}.toml"),
               str(FIXTURES / f"{findings}.toml"), "--export", str(out))


@pytest.mark.parametrize(("workload", "findings", "rc", "mode", "actions"), EXAMPLES,
                         ids=[f"{e[0]}@{e[1]}" for e in EXAMPLES])
def test_size_prints_the_verdict_and_exports_sizing(
    inferfit_cli: Callable[..., Any], tmp_path: Path, workload: str, findings: str, rc: int,
    mode: str, actions: list[str],
) -> None:
    out = tmp_path / "out.toml"
    r = _size(inferfit_cli, workload, findings, out)
    assert r.returncode == rc, r.stderr
    assert "Traceback" not in r.stderr
    assert f"mode {mode}" in r.stdout
    for action in actions:
        assert f"- {action}" in r.stdout
    doc = tomllib.loads(out.read_text())
    sizing = doc["sizing"]
    assert sizing["mode"] == mode
    assert sizing["actions"] == actions
    assert doc["probes"] == tomllib.loads((FIXTURES / f"{findings}.toml").read_text())["probes"]
    for key in HEADLINE[:2]:
        assert key in sizing
    # every reason printed with its formula, every figure with its source
    for reason in sizing["reasons"]:
        assert f"[{reason['rule']}]" in r.stdout
        assert reason["formula"]
        for f in reason["figures"]:
            assert f["source"]


def test_every_printed_number_comes_from_the_exported_table(
    inferfit_cli: Callable[..., Any], tmp_path: Path,
) -> None:
    out = tmp_path / "out.toml"
    r = _size(inferfit_cli, "realtime-chat-8b", "h100x8-box", out)
    sizing = tomllib.loads(out.read_text())["sizing"]
    for key in (*HEADLINE, "required_concurrency", "replicas", "bandwidth_mbit_needed",
                "model_load_s"):
        assert key in sizing
        assert f"{key} = " in r.stdout
    assert sizing["kv_bytes_per_token"] == 131_072
    assert "131,072" in r.stdout


def test_size_json_and_no_probes_at_all(inferfit_cli: Callable[..., Any]) -> None:
    r = inferfit_cli("size", "--workload", str(WORKLOADS / "mixed-deployment.toml"),
                     str(FIXTURES / "no-probes.toml"), "--json")
    assert r.returncode in (0, 1), r.stderr
    table = json.loads(r.stdout)
    assert table["confidence"] == 0.1
    assert "fits" not in table
    assert any("probes.gpu" in m for m in table["missing_inputs"])


def test_size_with_only_a_broken_gpu_probe_says_what_it_could_not_judge(
    inferfit_cli: Callable[..., Any],
) -> None:
    r = inferfit_cli("size", "--workload", str(WORKLOADS / "realtime-chat-8b.toml"),
                     str(FIXTURES / "system-only.toml"))
    assert r.returncode == 0, r.stderr
    assert "not judged / missing inputs" in r.stdout
    assert "fit, KV budget and concurrency not judged" in r.stdout


def test_size_refuses_bad_files_with_file_and_key(inferfit_cli: Callable[..., Any],
                                                  tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[model]\nparams = "8B"\n[realtime]\nqps_peak = 3\n')
    r = inferfit_cli("size", "--workload", str(bad), str(FIXTURES / "h100x8-box.toml"))
    assert r.returncode == 3
    assert f"{bad}: model.params must be a positive number, got the string '8B'" in r.stderr
    r = inferfit_cli("size", "--workload", str(WORKLOADS / "nightly-batch.toml"),
                     str(tmp_path / "none.toml"))
    assert r.returncode == 3
    assert "none.toml: cannot read" in r.stderr


def test_size_reads_hf_config_locally_or_says_it_could_not(
    inferfit_cli: Callable[..., Any], tmp_path: Path,
) -> None:
    w = tmp_path / "w.toml"
    cfg = FIXTURES / "llama-3-8b-config.json"
    w.write_text(f'[model]\nhf_config = "{cfg}"\n[realtime]\nqps_peak = 20.0\n')
    r = inferfit_cli("size", "--workload", str(w), str(FIXTURES / "h100x8-box.toml"), "--json")
    table = json.loads(r.stdout)
    assert table["weights_bytes"] == 2 * 8_030_261_248  # params estimated from config.json
    assert table["kv_bytes_per_token"] == 131_072
    assert "missing_inputs" not in table or not any("hf_config" in m
                                                    for m in table["missing_inputs"])
    w.write_text('[model]\nhf_config = "/nonexistent.invalid/config.json"\n'
                 "[realtime]\nqps_peak = 20.0\n")
    r = inferfit_cli("size", "--workload", str(w), str(FIXTURES / "h100x8-box.toml"), "--json")
    assert r.returncode in (0, 1), r.stderr
    table = json.loads(r.stdout)
    assert any("could not read hf_config" in m for m in table["missing_inputs"])
    assert "weights_bytes" not in table


def test_check_with_workload_over_real_sshd_exports_sizing(
    sshd: Any, inferfit_cli: Callable[..., Any], tmp_path: Path,
) -> None:
    cfg = tmp_path / "model dir" / "config.json"  # on "the box" (the sshd is this machine)
    cfg.parent.mkdir()
    cfg.write_text((FIXTURES / "llama-3-8b-config.json").read_text())
    w = tmp_path / "w.toml"
    w.write_text(f'name = "chat"\n[model]\nhf_config = "{cfg}"\n'
                 "[realtime]\nqps_peak = 20.0\ne2e_ms_p95 = 8000\n")
    out = tmp_path / "f.toml"
    r = inferfit_cli("check", "--probe", "system", "--workload", str(w), "--export", str(out),
                     *sshd.cli())
    assert r.returncode in (0, 1, 3), r.stderr  # 3: the system probe timed out on a busy box
    doc = tomllib.loads(out.read_text())
    sizing = doc["sizing"]
    assert sizing["workload"] == "chat"
    assert sizing["mode"] == "realtime"
    assert sizing["kv_bytes_per_token"] == 131_072
    assert sizing["required_concurrency"] == 160  # 20 QPS × 8 s budget: no nginx, no GPU
    assert any("probes.gpu" in m for m in sizing["missing_inputs"])
    # config.json was read over SSH: params estimated from it, no hf_config complaint
    assert sizing["weights_bytes"] == 2 * 8_030_261_248
    assert not any("hf_config" in m for m in sizing["missing_inputs"])
    assert "sizing: chat — mode realtime" in r.stdout
    assert "[littles_law] 20 req/s × 8.00 s ≈ 160 requests in flight at peak" in r.stdout


def test_check_refuses_a_bad_workload_before_connecting(
    inferfit_cli: Callable[..., Any], tmp_path: Path,
) -> None:
    w = tmp_path / "w.toml"
    w.write_text("[model]\nparams = 8e9\n")
    r = inferfit_cli("check", "--probe", "system", "--workload", str(w), "nonexistent.invalid")
    assert r.returncode == 3
    assert "a workload needs [realtime], [batch] or both" in r.stderr
    assert "nonexistent.invalid" not in r.stderr
