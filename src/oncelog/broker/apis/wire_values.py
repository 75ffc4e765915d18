"""Wire conventions several APIs share: sentinel values and unit conversions."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

# authorized_operations when the client did not ask for them (Kafka's Integer.MIN_VALUE).
OPS_UNKNOWN = -(2**31)

# isolation_level in Fetch and ListOffsets.
READ_COMMITTED = 1

# "No topic id" in responses (kio decodes it as None).
ZERO_UUID = uuid.UUID(int=0)


def sole_replica(node_id: int) -> dict[str, Any]:
    """The leadership fields of every partition on a single node (Metadata and
    DescribeTopicPartitions): this node leads at epoch 0 and is the only replica."""
    return {
        "error_code": ErrorCode.none,
        "leader_id": node_id,
        "leader_epoch": 0,
        "replica_nodes": (node_id,),
        "isr_nodes": (node_id,),
        "offline_replicas": (),
    }


def duration_ms(td: datetime.timedelta) -> int:
    """kio decodes Kafka's millisecond durations as timedelta."""
    return int(td.total_seconds() * 1000)
