"""Request handlers, one module per API family; ``register_all`` wires them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from oncelog.broker.broker import Broker


def register_all(broker: Broker) -> None:
    from oncelog.broker.handlers import (
        cluster,
        configs,
        fetch,
        groups,
        offsets,
        produce,
        topics,
        txn,
    )

    for module in (cluster, topics, configs, produce, fetch, offsets, txn, groups):
        module.register(broker)
