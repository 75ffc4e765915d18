"""`oncelog users add|list|delete`: SCRAM credentials.

Online through the Admin API (AlterUserScramCredentials); offline with
``--data-dir`` straight into the broker's credential store, to bootstrap the
first super user before the broker starts (like ``kafka-storage format --add-scram``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from oncelog.cli import common
from oncelog.cli.command_config import Bootstrap, CommandConfig, Output
from oncelog.cli.common import emit, error_text, table
from oncelog.client.scram_admin import ScramAdmin

app = typer.Typer(no_args_is_help=True, help="Add, list and delete SCRAM users.")
STORE = ("meta", "scram_credentials.json")

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", help="Write the broker's credential store directly (broker stopped)."
    ),
]
Mechanism = Annotated[str, typer.Option("--mechanism", help="SCRAM-SHA-256 or SCRAM-SHA-512.")]


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _admin(bootstrap: str, config: Path | None) -> ScramAdmin:
    return ScramAdmin(common.admin(bootstrap, config))


def _store(data_dir: Path) -> Any:
    from oncelog.security.credential_store import ScramCredentialStore

    return ScramCredentialStore(data_dir.joinpath(*STORE)).load()


@contextlib.contextmanager
def _locked_store(data_dir: Path) -> Iterator[Any]:
    """The store of a stopped broker, with its data directory locked as the broker locks
    it: writing under a running broker would be overwritten by it (or overwrite it)."""
    from oncelog.storage.dir_lock import DataDirInUse, DataDirLock

    try:
        lock = DataDirLock.acquire(data_dir)
    except DataDirInUse as exc:
        _fail(f"{exc}; stop the broker, or leave out --data-dir to go through it")
        raise AssertionError from exc  # _fail raised
    except OSError as exc:
        _fail(f"cannot lock data directory {data_dir}: {exc.strerror or exc}")
        raise AssertionError from exc
    try:
        yield _store(data_dir)
    finally:
        lock.release()


def _mechanism(name: str) -> Any:
    from oncelog.security.scram import ScramMechanism

    try:
        mech = ScramMechanism.from_sasl_name(name)
    except KeyError:
        raise typer.BadParameter(f"unknown mechanism {name!r}", param_hint="--mechanism") from None
    if mech is ScramMechanism.UNKNOWN:
        raise typer.BadParameter(f"unknown mechanism {name!r}", param_hint="--mechanism")
    return mech


def _password(given: str | None, from_stdin: bool) -> str:
    """The password of ``users add``: --password, a line of stdin, or a prompt on a terminal.
    Never getpass without a terminal: it would echo the password and warn (GetPassWarning)."""
    if given is not None and from_stdin:
        _usage("--password and --password-stdin exclude each other")
    if from_stdin:
        given = sys.stdin.readline().rstrip("\r\n")
        if not given:
            _usage("--password-stdin: the first line of standard input is empty")
    elif given is None:
        if not sys.stdin.isatty():
            _usage("no password: give --password or --password-stdin (prompting needs a terminal)")
        given = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not given:
        _usage("the password is empty")
    return given


def _usage(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


@app.command()
def add(
    name: str,
    password: Annotated[
        str | None,
        typer.Option(
            "--password",
            help="The password. Without it or --password-stdin the command prompts for it on "
            "a terminal, and fails (exit code 2) without one.",
        ),
    ] = None,
    password_stdin: Annotated[
        bool,
        typer.Option(
            "--password-stdin",
            help="Read the password from the first line of standard input (for scripts: it "
            "stays out of the process list and the shell history).",
        ),
    ] = False,
    mechanism: Mechanism = "SCRAM-SHA-512",
    iterations: Annotated[int, typer.Option("--iterations", min=4096, max=16384)] = 8192,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config: CommandConfig = None,
    data_dir: DataDir = None,
) -> None:
    """Create or replace a user's SCRAM credential."""
    mech = _mechanism(mechanism)
    password = _password(password, password_stdin)
    if data_dir is not None:
        from oncelog.security.scram import credential_from_password

        with _locked_store(data_dir) as store:
            store.apply([(name, mech, credential_from_password(mech, password, iterations))], [])
        typer.echo(f"stored {mech.sasl_name} credential for {name} in {data_dir}")
        return
    admin = _admin(bootstrap, config)
    try:
        admin.upsert(name, int(mech), iterations, password.encode())
    except Exception as exc:
        _fail(f"cannot add user {name!r}: {error_text(exc)}")
    typer.echo(f"added {mech.sasl_name} credential for {name}")


@app.command("list")
def list_(
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config: CommandConfig = None,
    data_dir: DataDir = None,
    output: Output = "table",
) -> None:
    """Users and their SCRAM mechanisms (never the secrets)."""
    rows: list[tuple[str, str, int]] = []
    if data_dir is not None:
        store = _store(data_dir)
        for user in store.users():
            for mech, cred in sorted(store.mechanisms(user).items()):
                rows.append((user, mech.sasl_name, cred.iterations))
    else:
        admin = _admin(bootstrap, config)
        try:
            described = admin.describe()
        except Exception as exc:
            _fail(f"cannot list users: {error_text(exc)}")
        rows += [(c.user, c.mechanism, c.iterations) for c in described]
    data = [{"user": u, "mechanism": m, "iterations": i} for u, m, i in rows]
    emit(output, data, table(None, ("user", "mechanism", "iterations"), rows))


@app.command()
def delete(
    name: str,
    mechanism: Mechanism = "SCRAM-SHA-512",
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config: CommandConfig = None,
    data_dir: DataDir = None,
) -> None:
    """Delete one SCRAM credential of a user."""
    mech = _mechanism(mechanism)
    if data_dir is not None:
        with _locked_store(data_dir) as store:
            if store.get(name, mech) is None:
                _fail(f"{name} has no {mech.sasl_name} credential")
            store.apply([], [(name, mech)])
        typer.echo(f"deleted {mech.sasl_name} credential of {name}")
        return
    admin = _admin(bootstrap, config)
    try:
        admin.delete(name, int(mech))
    except Exception as exc:
        _fail(f"cannot delete user {name!r}: {error_text(exc)}")
    typer.echo(f"deleted {mech.sasl_name} credential of {name}")
