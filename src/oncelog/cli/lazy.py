"""Subcommands imported only when they are run or listed.

Every admin subcommand pulls in the client, its kio schemas, rich and confluent-kafka
(~0.15 CPU-s with compiled bytecode, ~0.3 s without); ``oncelog broker`` needs none of
them, and every broker start paid for them. The root group below holds the eager
commands as usual and loads a lazy one from its module the first time a name is
resolved: running it, ``--help`` (which lists them all) or a typo's suggestions.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer
import typer.main
from typer.core import TyperGroup

if TYPE_CHECKING:
    from typer._click import Command  # typer's own click, which its groups hold


@dataclass(frozen=True)
class LazyCommand:
    """``module:attribute``: a ``typer.Typer`` (a group of subcommands) or a command
    function (registered as ``app.command(name)(function)`` would)."""

    module: str
    attribute: str
    hidden: bool = False


def build(name: str, spec: LazyCommand) -> Command:
    target = getattr(importlib.import_module(spec.module), spec.attribute)
    command: Command
    if isinstance(target, typer.Typer):
        command = typer.main.get_group(target)  # a group even with one subcommand
    else:
        single = typer.Typer(add_completion=False)
        single.command(name)(target)
        command = typer.main.get_command(single)
    command.name = name
    command.hidden = spec.hidden
    return command


class LazyCommands(MutableMapping[str, "Command"]):
    """A group's name -> command mapping whose lazy entries import on first access,
    in a fixed order (that of ``--help``)."""

    def __init__(
        self, eager: MutableMapping[str, Command], lazy: dict[str, LazyCommand], order: list[str]
    ) -> None:
        self._loaded: dict[str, Command] = dict(eager)
        self._lazy = dict(lazy)
        self._order = order

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded and name in self._lazy:
            self._loaded[name] = build(name, self._lazy[name])
        return self._loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._lazy.pop(name, None)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._lazy.pop(name, None)
        del self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        names = self._loaded.keys() | self._lazy.keys()
        ranked = [n for n in self._order if n in names]
        return iter(ranked + sorted(names - set(ranked)))

    def __len__(self) -> int:
        return len(self._loaded.keys() | self._lazy.keys())


class LazyGroup(TyperGroup):
    """The root group: ``LAZY`` and ``ORDER`` are set by the subclass ``lazy_group`` makes."""

    LAZY: dict[str, LazyCommand] = {}
    ORDER: list[str] = []

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands(self.commands, self.LAZY, self.ORDER)


def lazy_group(lazy: dict[str, LazyCommand], order: list[str]) -> type[LazyGroup]:
    return type("RootGroup", (LazyGroup,), {"LAZY": lazy, "ORDER": order})
