"""Options and helpers shared by subcommands."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from inferfit.api import Progress
from inferfit.config import Config, ConfigError
from inferfit.findings import Findings
from inferfit.hosts import Host, SSHOptions, make_host


def add_ssh_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("SSH (as ssh(1) does)")
    group.add_argument("-F", dest="ssh_config", metavar="FILE",
                       help="ssh client config file (default ~/.ssh/config)")
    group.add_argument("-i", dest="identity", metavar="KEY", help="private key file")
    group.add_argument("-p", dest="port", type=int, metavar="PORT",
                       help="port (a :port in TARGET wins)")
    group.add_argument("--accept-new-host-key", action="store_true",
                       help="record an unknown host key in known_hosts "
                            "(StrictHostKeyChecking=accept-new); a changed key is still refused")


def add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help="config file layered over defaults and the user config")


def load_config(args: argparse.Namespace, overrides: dict[str, Any] | None = None) -> Config:
    return Config.load(getattr(args, "config", None), overrides)


def ssh_options(args: argparse.Namespace, config: Config) -> SSHOptions:
    return SSHOptions(
        config_file=getattr(args, "ssh_config", None),
        identity_file=getattr(args, "identity", None),
        port=getattr(args, "port", None),
        accept_new_host_key=bool(getattr(args, "accept_new_host_key", False)),
        connect_timeout_s=float(config.get("ssh.connect_timeout_s", 10.0)),
        keepalive_s=float(config.get("ssh.keepalive_s", 15.0)),
    )


def host_for(target: str | None, args: argparse.Namespace, config: Config) -> Host:
    return make_host(target, ssh_options(args, config))


def stderr_progress(host_name: str, quiet: bool = False) -> Any:
    def report(p: Progress) -> None:
        if quiet:
            return
        frac = f" {p.fraction:4.0%}" if p.fraction is not None and p.fraction < 1 else ""
        print(f"inferfit: {host_name}: {p.probe}:{frac} {p.message}", file=sys.stderr)

    return report


def export_findings(findings: Findings, path: str, what: str = "findings") -> bool:
    """Write findings atomically to ``path``; say where, or why not, on stderr."""
    try:
        written = findings.write(path)
    except (OSError, ValueError) as exc:  # FindingsError is a ValueError
        print(f"inferfit: cannot write {path}: {exc}", file=sys.stderr)
        return False
    print(f"inferfit: {what} written to {written}", file=sys.stderr)
    return True


def config_error(exc: ConfigError) -> int:
    print(f"inferfit: config error: {exc}", file=sys.stderr)
    return 3
