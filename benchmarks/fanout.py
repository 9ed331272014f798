"""Fleet fan-out: inferfit vs `ansible -m command` over 1, 10 and 100 loopback targets.

Starts its own OpenSSH sshd on 127.0.0.1 (MaxStartups raised so 100 connections
at once are not dropped), writes an ssh config and an Ansible inventory with N
aliases of it, then times, in the same run and on the same work:

  inferfit  `inferfit check --probe system --hosts-from-ssh-config 'box*'
             --export-dir DIR --max-parallel N` (connect, run the system probe's
             script, parse, write N findings files, print the summary)
  ansible   `ansible all -m command -a '{"argv": [sh, -c, <the same script>, ...]}'
             -f N` (SSH pipelining on, which only makes Ansible faster)

Wall time is the whole process (interpreter start included); peak memory is the
largest sum of RSS over the process and all its children, sampled every 20 ms;
cpu is the tool's own (with its children, e.g. Ansible's ssh clients) and
"sshd+sessions" what the server side burnt on the same cores. On loopback every
"box" shares this machine's CPUs with the tool, so the server side's CPU shows
up in the wall time in a way it would not across real boxes.

The sshd sets SHLVL=1 for its sessions so bash skips ~/.bashrc (bash sources it
for ssh commands at SHLVL < 2): this machine's root rc runs `pyenv init`, about
90 ms of CPU per command, which is not what a box's login costs. Both tools get
the same server.

Targets (issue 8): inferfit over 100 targets under 2x its single-target wall
time, and at least 5x faster than Ansible over 100 targets.

    .venv/bin/python benchmarks/fanout.py            # 1, 10, 100
    .venv/bin/python benchmarks/fanout.py --sizes 1 10 --no-ansible   # quick
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
sys.path.insert(0, str(REPO / "tests"))
from sshd_support import stop, write_client_files, write_server_files  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    user: str
    key: Path
    known_hosts: Path

    def stop(self) -> None:
        stop(self.proc)


def start_sshd(base: Path) -> Server:
    port = free_port()
    host_pub, _config = write_server_files(
        base, address="127.0.0.1", port=port, setenv={"SHLVL": "1"},
        extra=["MaxSessions 20", "MaxStartups 1000:30:2000", "PerSourcePenalties no",
               "LoginGraceTime 60"],
    )
    known, _ssh_config = write_client_files(base, address="127.0.0.1", port=port,
                                            host_pub=host_pub)
    log = (base / "sshd.log").open("wb")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(base / "sshd_config")],
                            stdout=log, stderr=log)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            # Older OpenSSH does not know PerSourcePenalties: retry without it.
            text = (base / "sshd_config").read_text().replace("PerSourcePenalties no\n", "")
            (base / "sshd_config").write_text(text)
            proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(base / "sshd_config")],
                                    stdout=log, stderr=log)
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return Server(proc, port, getpass.getuser(), base / "id_ed25519", known)
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"sshd did not start: {(base / 'sshd.log').read_text()}")


def write_targets(base: Path, server: Server, n: int) -> tuple[Path, Path]:
    cfg = base / f"ssh_config_{n}"
    names = [f"box{i:03d}" for i in range(1, n + 1)]
    cfg.write_text("".join(
        f"Host {a}\n    HostName 127.0.0.1\n    Port {server.port}\n    User {server.user}\n"
        f"    IdentityFile {server.key}\n    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {server.known_hosts}\n    StrictHostKeyChecking yes\n"
        for a in names))
    inv = base / f"inventory_{n}.ini"
    ssh_args = (f"-F /dev/null -o UserKnownHostsFile={server.known_hosts} "
                "-o StrictHostKeyChecking=yes -o IdentitiesOnly=yes")
    inv.write_text("[boxes]\n" + "".join(
        f"{a} ansible_host=127.0.0.1 ansible_port={server.port}\n" for a in names) +
        f"[all:vars]\nansible_user={server.user}\nansible_ssh_private_key_file={server.key}\n"
        f"ansible_ssh_common_args='{ssh_args}'\nansible_python_interpreter=/usr/bin/python3\n")
    return cfg, inv


def _tree_rss_kib(root: int) -> int:
    kids: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        pid = int(entry.name)
        ppid = rss_kib = 0
        for line in status.splitlines():
            if line.startswith("PPid:"):
                ppid = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss_kib = int(line.split()[1])
        kids.setdefault(ppid, []).append(pid)
        rss[pid] = rss_kib
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += rss.get(pid, 0)
        todo.extend(kids.get(pid, []))
    return total


@dataclass
class Run:
    wall_s: float
    peak_mib: float
    rc: int
    out: str
    cpu_s: float = 0.0  # the tool: process and children, user + system
    server_cpu_s: float = 0.0  # sshd and the sessions it ran


SERVER_PID = 0
TICK = os.sysconf("SC_CLK_TCK")


def _server_cpu_s() -> float:
    if not SERVER_PID:
        return 0.0
    try:
        fields = Path(f"/proc/{SERVER_PID}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def measure(argv: list[str], env: dict[str, str], timeout: float) -> Run:
    peak = 0
    cpu0, server0 = _children_cpu_s(), _server_cpu_s()
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kib(proc.pid))
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    wall = time.monotonic() - started
    done.set()
    sampler.join()
    cpu = _children_cpu_s() - cpu0
    time.sleep(0.5)  # let sshd reap the last sessions before reading its CPU time
    return Run(wall, peak / 1024, proc.returncode, out, cpu, _server_cpu_s() - server0)


SYSTEM_SCRIPT_ARGS = ["/", "/var", "/tmp"]


def inferfit_run(base: Path, cfg: Path, n: int, env: dict[str, str]) -> Run:
    out = base / f"out_{n}"
    shutil.rmtree(out, ignore_errors=True)
    argv = [str(BIN / "inferfit"), "check", "-q", "--probe", "system", "-F", str(cfg),
            "--hosts-from-ssh-config", "box*", "--export-dir", str(out),
            "--max-parallel", str(max(n, 1))]
    run = measure(argv, env, timeout=600)
    files = len(list(out.glob("*.toml"))) if out.is_dir() else 0
    if files != n or run.rc not in (0, 1):
        raise RuntimeError(f"inferfit over {n} targets wrote {files} files, rc {run.rc}:\n"
                           f"{run.out[-2000:]}")
    return run


def ansible_run(base: Path, inv: Path, n: int, env: dict[str, str]) -> Run:
    from inferfit.probes.system import SCRIPT

    args = json.dumps({"argv": ["sh", "-c", SCRIPT, "inferfit", *SYSTEM_SCRIPT_ARGS]})
    argv = [str(BIN / "ansible"), "all", "-i", str(inv), "-m", "command", "-a", args,
            "-f", str(max(n, 1)), "-o"]
    run = measure(argv, env, timeout=900)
    ok = run.out.count("| CHANGED |") + run.out.count("| SUCCESS |")
    if ok != n:
        raise RuntimeError(f"ansible over {n} targets: {ok} ok, rc {run.rc}:\n{run.out[-2000:]}")
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--no-ansible", action="store_true", help="time inferfit only")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (best per size is reported)")
    opts = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="inferfit-fanout-"))
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "INFERFIT_CONFIG_DIR": str(home / "cfg"),
           "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_PIPELINING": "True", "ANSIBLE_HOST_KEY_CHECKING": "True",
           "ANSIBLE_LOCAL_TEMP": str(base / "ansible-local"),
           "ANSIBLE_SSH_CONTROL_PATH_DIR": str(base / "cp"),
           "ANSIBLE_TIMEOUT": "60",
           # No ControlPersist masters: they would outlive the run (and hide their
           # sessions' CPU from the figures); inferfit keeps no connection either.
           "ANSIBLE_SSH_ARGS": "-o ControlMaster=no -o ControlPath=none",
           "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    env.pop("SSH_AUTH_SOCK", None)
    server = start_sshd(base)
    global SERVER_PID
    SERVER_PID = server.proc.pid
    results: dict[int, dict[str, Run]] = {n: {} for n in opts.sizes}
    files = {n: write_targets(base, server, n) for n in opts.sizes}
    try:
        # Sizes interleaved within each round, best of the rounds: a busy shared machine
        # then slows every size alike instead of whichever ran during a burst.
        for _ in range(max(opts.repeat, 1)):
            for n in opts.sizes:
                cfg, inv = files[n]
                row = results[n]
                r = inferfit_run(base, cfg, n, env)
                if "inferfit" not in row or r.wall_s < row["inferfit"].wall_s:
                    row["inferfit"] = r
                if not opts.no_ansible:
                    a = ansible_run(base, inv, n, env)
                    if "ansible" not in row or a.wall_s < row["ansible"].wall_s:
                        row["ansible"] = a
        for n in opts.sizes:
            row = results[n]
            for tool, r in row.items():
                print(f"{n:>4} targets  {tool:<8} wall {r.wall_s:6.2f} s  peak {r.peak_mib:7.1f} "
                      f"MiB  cpu {r.cpu_s:6.2f} s  sshd+sessions cpu {r.server_cpu_s:6.2f} s",
                      flush=True)
            if "ansible" in row:
                print(f"{n:>4} targets  ansible/inferfit wall "
                      f"{row['ansible'].wall_s / row['inferfit'].wall_s:5.1f}x", flush=True)
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    sizes = sorted(results)
    if len(sizes) > 1 and sizes[0] == 1:
        one, big = results[1]["inferfit"].wall_s, results[sizes[-1]]["inferfit"].wall_s
        verdict = "met" if big < 2 * one else "MISSED"
        print(f"inferfit {sizes[-1]} targets / 1 target: {big / one:.2f}x "
              f"(target < 2x: {verdict})")
        per_box = (results[sizes[-1]]["inferfit"].cpu_s - results[1]["inferfit"].cpu_s) / max(
            sizes[-1] - 1, 1)
        print(f"inferfit client CPU per extra target: {per_box * 1000:.1f} ms")
    if "ansible" in results[sizes[-1]]:
        a, i = results[sizes[-1]]["ansible"], results[sizes[-1]]["inferfit"]
        ratio = a.wall_s / i.wall_s
        print(f"ansible / inferfit at {sizes[-1]} targets: wall {ratio:.1f}x "
              f"(target >= 5x: {'met' if ratio >= 5 else 'MISSED'}); CPU, tool + server: "
              f"{(a.cpu_s + a.server_cpu_s) / max(i.cpu_s + i.server_cpu_s, 1e-9):.1f}x; "
              f"peak memory {a.peak_mib / max(i.peak_mib, 1e-9):.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
