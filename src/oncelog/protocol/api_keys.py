"""API keys and the version ranges oncelog advertises.

Only versions whose semantics are fully implemented are listed: a client picks
the highest version both sides support, so advertising a version we only parse
would silently change behaviour.
"""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


# (min, max) per API implemented by the broker foundation.
BROKER_API_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (0, 12),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 5),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
}

# Transactions (KIP-98, KIP-664), transaction version 1 only: versions that
# signal TV2 (per-transaction epoch bumps, KIP-890 part 2) are not advertised.
TXN_API_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
}

# Consumer groups, classic protocol (KIP-447 generation fencing in TxnOffsetCommit v3+).
# OffsetCommit v10 / OffsetFetch v10 switch to topic ids and are not advertised.
GROUP_API_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
}
