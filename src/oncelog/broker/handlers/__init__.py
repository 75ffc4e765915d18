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
        offsets,
        produce,
        producer_id,
        topics,
    )

    for module in (cluster, topics, configs, produce, fetch, offsets, producer_id):
        module.register(broker)
