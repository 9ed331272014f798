"""The `inferfit` command line: the console by default, headless subcommands otherwise.

Each subcommand lives in its own module listed in COMMANDS and exposes
``add_parser(subparsers)`` that sets ``func`` (returning the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from inferfit import __version__

# Exit codes, Nagios-style.
EXIT_OK, EXIT_WARN, EXIT_FAIL, EXIT_UNKNOWN = 0, 1, 2, 3

COMMANDS: tuple[str, ...] = (
    "inferfit.cli.check",
    "inferfit.cli.plugins_cmd",
    "inferfit.cli.config_cmd",
    "inferfit.cli.console",
    "inferfit.cli.show",
    "inferfit.cli.compare",
    "inferfit.cli.export",
    "inferfit.cli.size",
    "inferfit.cli.batch",
)

DESCRIPTION = """\
Is this AI-inference box fit for the workload, and should it serve realtime
API traffic, offline batch jobs, or both?

  inferfit [TARGET ...]             open the console (this machine without TARGET)
  inferfit check [TARGET ...]       run the probes headless; exit 0 ok, 1 warn, 2 fail,
                                    3 could not check; --export FILE writes the findings
  inferfit show FILE.toml           replay saved findings in the console
  inferfit size --workload W F.toml what-if sizing on saved findings
  inferfit compare A.toml B.toml    side by side, odd box out highlighted
  inferfit show DIR --compare       the same as a screen in the console
  inferfit batch pause TARGET       mixed mode: pause batch work under a lease (opt-in)

TARGET is [user@]host[:port] or an alias from ~/.ssh/config (or -F FILE).
Findings format: docs/findings.md. Every COMMAND has --help.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inferfit",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"inferfit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for modname in COMMANDS:
        importlib.import_module(modname).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    commands = _subcommand_names(parser)
    if not args_list or (args_list[0] not in commands and args_list[0] not in {"-h", "--help",
                                                                              "--version"}):
        args_list = ["console", *args_list] if "console" in commands else args_list
    if not args_list:
        parser.print_help()
        return EXIT_OK
    args = parser.parse_args(args_list)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return EXIT_OK
    try:
        return int(func(args))
    except KeyboardInterrupt:
        print("inferfit: interrupted", file=sys.stderr)
        return 130


def _subcommand_names(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def run() -> None:
    sys.exit(main())
