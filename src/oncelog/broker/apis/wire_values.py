"""Wire conventions several APIs share: sentinel values and unit conversions."""

from __future__ import annotations

import datetime

# authorized_operations when the client did not ask for them (Kafka's Integer.MIN_VALUE).
OPS_UNKNOWN = -(2**31)

# isolation_level in Fetch and ListOffsets.
READ_COMMITTED = 1


def duration_ms(td: datetime.timedelta) -> int:
    """kio decodes Kafka's millisecond durations as timedelta."""
    return int(td.total_seconds() * 1000)
