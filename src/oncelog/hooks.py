"""Test hooks: the one seam through which fault-injection tests reach into product code.

Product code marks a named point and carries on; nothing happens unless a hook is
installed for that name (the broker installs the hooks its ``oncelog.debug.*`` settings
ask for, see ``broker/debug_settings.py``; ``oncelog.testing`` installs its own, e.g. the
Spark kill points). With nothing installed a point costs one dict lookup.

Three kinds of point:

* ``point(name, **facts)``: the hook is called with the facts and may block (on a worker
  thread only) or raise;
* ``await apoint(name, **facts)``: on the event loop; the hook may be a coroutine
  function (to sleep) and may raise;
* ``delay_ms(name, **facts)``: the hook answers how long the caller holds back (0 when
  none is installed), so the caller can keep its own interruptible wait.

The points:

=====================  =====  ==================================================================
name                   kind   where
=====================  =====  ==================================================================
``coordinator.load``   apoint a coordinator partition's load is about to start (``topic``,
                              ``partition``); raising fails that load attempt
``txn.markers``        delay  transaction markers are held back this long after the EndTxn
``cleaner.stage``      delay  a cleaner pass reached ``stage`` (``cleaned``: a group's
                              .cleaned files are written; ``swap``: staged as .swap)
``group_sync.fsync``   point  the durable-acks syncer is about to fdatasync (its thread)
``spark.<point>``      point  the Spark sink reached a micro-batch stage (``batch_id``; see
                              ``oncelog.spark.hooks.POINTS``)
=====================  =====  ==================================================================

This module imports no other oncelog package (an import-linter contract), so every layer,
the Spark data source included, may call it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

Hook = Callable[..., object]

_hooks: dict[str, Hook] = {}


def install(name: str, hook: Hook) -> None:
    """Call ``hook`` at point ``name`` from now on (replacing any hook installed there)."""
    _hooks[name] = hook


def uninstall(name: str, hook: Hook | None = None) -> None:
    """Point ``name`` does nothing again (with ``hook``: only if that hook is installed)."""
    if hook is None or _hooks.get(name) is hook:
        _hooks.pop(name, None)


@contextmanager
def installed(hooks: Mapping[str, Hook]) -> Iterator[None]:
    """``hooks`` installed for the duration of the block; then the points they replaced
    get their earlier hooks back (or none)."""
    before = {name: _hooks.get(name) for name in hooks}
    _hooks.update(hooks)
    try:
        yield
    finally:
        for name, hook in before.items():
            if hook is None:
                _hooks.pop(name, None)
            else:
                _hooks[name] = hook


def point(name: str, **facts: object) -> None:
    hook = _hooks.get(name)
    if hook is not None:
        hook(**facts)


async def apoint(name: str, **facts: object) -> None:
    hook = _hooks.get(name)
    if hook is not None:
        result = hook(**facts)
        if inspect.isawaitable(result):
            await result


def delay_ms(name: str, **facts: object) -> int:
    hook = _hooks.get(name)
    if hook is None:
        return 0
    held = hook(**facts)
    return held if isinstance(held, int) else 0
