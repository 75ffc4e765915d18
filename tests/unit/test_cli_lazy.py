"""The root command group loads subcommands lazily (oncelog.cli.lazy) and still shows,
runs and suggests every one of them as an eager group did."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from oncelog.cli.main import LAZY, ORDER, app

runner = CliRunner()


def test_help_lists_every_command_in_order_and_hides_the_alias() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}, prog_name="oncelog")
    assert result.exit_code == 0, result.output
    listed = [
        line.split()[1]
        for line in result.output.splitlines()
        if line.startswith("│ ") and len(line.split()) > 1 and line.split()[1] in ORDER
    ]
    assert listed == [n for n in ORDER if n != "consumer-groups"]
    assert len(ORDER) == len(LAZY) + 1  # broker is the one eager command


def test_lazy_group_and_alias_resolve_to_the_same_subcommands() -> None:
    for name in ("groups", "consumer-groups"):
        result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        for sub in ("list", "describe", "reset-offsets", "delete", "delete-offsets"):
            assert f"│ {sub} " in result.output
    # A group of one subcommand stays a group (producers fence), as add_typer made it.
    result = runner.invoke(app, ["producers", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "│ fence " in result.output


def test_typo_suggests_a_lazy_command() -> None:
    result = runner.invoke(app, ["topic"], prog_name="oncelog")
    assert result.exit_code == 2
    assert "Did you mean 'topics'?" in result.output


def test_lazy_command_runs_its_function() -> None:
    result = runner.invoke(app, ["dump-log", "/nonexistent/00000000000000000000.log"])
    assert result.exit_code != 0
    assert "nonexistent" in result.output


def test_importing_the_cli_loads_no_subcommand_module() -> None:
    probe = (
        "import json, sys\n"
        "import oncelog.cli.main\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('oncelog.cli.', "
        "'oncelog.client', 'rich', 'confluent_kafka')))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == [
        "oncelog.cli.lazy",
        "oncelog.cli.logging_setup",
        "oncelog.cli.main",
    ]


def _typer_parse(argv: list[str]) -> dict[str, object]:
    """What typer passes to ``broker`` for ``argv`` (its parsing and callbacks)."""
    import typer.main

    root = typer.main.get_command(app)
    ctx = root.make_context("oncelog", list(argv))
    command = root.get_command(ctx, argv[0])  # type: ignore[attr-defined]
    assert command is not None
    return dict(command.make_context(argv[0], list(argv[1:]), parent=ctx).params)


def test_broker_fast_path_passes_what_typer_passes() -> None:
    from oncelog.cli.main import broker_arguments

    lines = [
        ["broker"],
        ["broker", "--data-dir", "/tmp/d", "--listen", "127.0.0.1:0"],
        ["broker", "--data-dir=/tmp/d", "--set", "a=1", "--set=b = 2", "--set", "c="],
        ["broker", "--config", "server.properties", "--advertised", "h:1", "--listen", "x:2"],
        ["broker", "--log-level", "warn", "--log-format", "JSON"],
        ["broker", "--log-level", "Trace", "--listen", "a:1", "--listen", "b:2"],
    ]
    for argv in lines:
        assert broker_arguments(argv) == _typer_parse(argv), argv
    # Left to typer: help, errors and anything unusual keep its messages and exit codes.
    for argv in (
        ["broker", "--help"],
        ["broker", "--set", "novalue"],
        ["broker", "--set", "=v"],
        ["broker", "--log-level", "LOUD"],
        ["broker", "--log-format", "xml"],
        ["broker", "--data-dir"],
        ["broker", "--listen", "-1"],
        ["broker", "--data-dir", ""],
        ["broker", "--nosuch", "x"],
        ["broker", "extra"],
        ["--verbose", "broker"],
        ["topics", "list"],
        [],
    ):
        assert broker_arguments(argv) is None, argv
