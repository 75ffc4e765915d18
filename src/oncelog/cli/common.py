"""What every client-side command shares: ``--bootstrap-server/-b`` (checked),
``--command-config``, ``--output table|json``, one error line per failure, tables that wrap
long ids on a terminal and never when piped, Kafka's flag spellings beside oncelog's
positional arguments, and librdkafka's logs routed to Python logging."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from oncelog.cli import command_config
from oncelog.cli.command_config import Bootstrap, CommandConfig, Output, fail, parse_servers
from oncelog.client.admin import Admin
from oncelog.client.config import ClientConfig
from oncelog.client.errors import ClientError
from oncelog.client.reach import check_cluster, check_reachable
from oncelog.client.retry import RetryPolicy

__all__ = ["Bootstrap", "CommandConfig", "Output", "fail", "parse_servers"]

# How long a command waits for an unreachable cluster before giving up.
REACH_TIMEOUT_S = 5.0
TIMEOUT_S = 15.0
# librdkafka's own log lines go here: silent, unless `oncelog --verbose` (enable_verbose).
LIBRDKAFKA_LOGGER = logging.getLogger("oncelog.cli.librdkafka")
LIBRDKAFKA_LOGGER.addHandler(logging.NullHandler())
LIBRDKAFKA_LOGGER.propagate = False
# The width of stdout when it is no terminal: wide enough that no row of a table wraps,
# so `| grep` sees one row per line with every cell whole, as with Kafka's tools.
PIPE_WIDTH = 1 << 20
T = TypeVar("T")


def stdout_console() -> Console:
    """The console every command prints to: the terminal's width on a terminal, where
    long cells wrap; one row per line (PIPE_WIDTH) otherwise. Built per call, as a command
    may run with another stdout (CliRunner, a pipe) than the module was imported under."""
    return Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)


class _StdoutConsole:
    """``console.print(...)`` on :func:`stdout_console`, whatever stdout is now."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        stdout_console().print(*objects, **kwargs)


console = _StdoutConsole()


def one_of(positional: T | None, flag_value: T | None, positional_name: str, flag: str) -> T:
    """The value given either positionally (oncelog's spelling) or by ``flag`` (Kafka's:
    kafka-topics.sh --topic, kafka-transactions.sh --transactional-id, ...). Both with
    different values, or neither, is a one-line usage error naming both spellings."""
    if positional is not None and flag_value is not None and positional != flag_value:
        fail(f"{positional_name} {positional!r} and {flag} {flag_value!r} disagree: give one", 2)
    value = positional if positional is not None else flag_value
    if value is None:
        fail(f"missing {positional_name} (or {flag} {positional_name})", 2)
    return value


def ensure_reachable(
    bootstrap: str, config: ClientConfig | None = None, timeout: float = REACH_TIMEOUT_S
) -> None:
    """Fail with one line unless some bootstrap server accepts a TCP connection within
    ``timeout`` seconds (connection refused is retried until then, as clients do) and, with
    ``config``, completes its TLS/SASL handshake (a wrong password is SASL_AUTHENTICATION_FAILED
    at once, not librdkafka's "Broker transport failure" after its timeout)."""
    parse_servers(bootstrap)
    try:
        if config is None:
            check_reachable(ClientConfig(bootstrap), timeout)
        else:
            check_cluster(config, timeout)
    except ClientError as exc:
        fail(str(exc))


def client_conf(bootstrap: str, config_file: Path | None, **extra: Any) -> dict[str, Any]:
    """A confluent-kafka configuration for a CLI client: security settings from
    ``--command-config``, librdkafka's logs to Python logging."""
    return {
        "bootstrap.servers": bootstrap,
        **command_config.load(config_file),
        "logger": LIBRDKAFKA_LOGGER,
        **extra,
    }


def client_config(bootstrap: str, config_file: Path | None) -> ClientConfig:
    cfg = command_config.client_config(bootstrap, config_file)
    conf: dict[str, Any] = {**cfg.conf, "logger": LIBRDKAFKA_LOGGER}
    return ClientConfig(cfg.bootstrap, conf)


# Admins of this command: librdkafka hands its log lines over only when a client is
# polled, so --verbose polls them once more before exiting.
_admins: list[Admin] = []


def admin(bootstrap: str, config_file: Path | None) -> Admin:
    """The client layer's Admin for a command, after checking its settings (a bad
    --command-config is a usage error) and that the cluster is reachable."""
    config = client_config(bootstrap, config_file)
    ensure_reachable(bootstrap, config)
    a = Admin(
        config,
        policy=RetryPolicy(deadline_s=TIMEOUT_S),
        timeout=TIMEOUT_S,
    )
    _admins.append(a)
    return a


def enable_verbose() -> None:
    """``oncelog --verbose``: DEBUG logs of oncelog and librdkafka on stderr."""
    import atexit

    logging.basicConfig(
        level=logging.DEBUG, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    LIBRDKAFKA_LOGGER.propagate = True

    def drain() -> None:
        for a in _admins:
            a.serve_logs()

    atexit.register(drain)


@contextmanager
def failures(what: str) -> Iterator[None]:
    """Turn a client error into the command's one error line."""
    try:
        yield
    except ClientError as exc:
        fail(f"{what}: {exc}")


def error_text(exc: Exception) -> str:
    """An error as the ACL and user commands print it: a client error in confluent-kafka's
    own spelling (``KafkaError{code=...,val=...,str="..."}``), as they always have."""
    return exc.library_text if isinstance(exc, ClientError) else str(exc)


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    """A rich table whose cells wrap (``fold``) rather than cut long ids."""
    t = Table(title=title)
    for col in columns:
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*("-" if v is None else str(v) for v in row))
    return t


def emit(output: str, data: Any, render: Table | str | None) -> None:
    """JSON (``data``, as is) or the human form (``render``)."""
    if output == "json":
        typer.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
    elif render is not None:
        console.print(render, soft_wrap=False)


def progress(total: int, description: str) -> Any:
    """A rich progress bar on stderr (shown only on a terminal) for long operations:
    ``with progress(n, "...") as advance: ... advance(k)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    @contextmanager
    def bar() -> Iterator[Any]:
        err = Console(stderr=True)
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        ) as p:
            task = p.add_task(description, total=total)
            yield lambda n=1: p.advance(task, n)

    return bar()


def parse_topic_partitions(values: list[str]) -> list[tuple[str, list[int] | None]]:
    """``--topic T`` (every partition) or ``--topic T:0,2`` (those partitions), as Kafka's
    tools take them."""
    out: list[tuple[str, list[int] | None]] = []
    for value in values:
        topic, sep, parts = value.partition(":")
        if not topic:
            fail(f"--topic {value}: expected TOPIC or TOPIC:PARTITION,...", 2)
        if not sep:
            out.append((topic, None))
            continue
        try:
            out.append((topic, sorted({int(p) for p in parts.split(",") if p.strip()})))
        except ValueError:
            fail(f"--topic {value}: partitions must be numbers", 2)
    return out
