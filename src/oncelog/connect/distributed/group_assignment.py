"""What the group leader hands each member after a JoinGroup (pure): the encoded Connect
assignments, from the members' metadata and the leader's view of the config topic.

- A member that has read the config topic further than the leader gets, like every
  other member, ``CONFIG_MISMATCH``: all rejoin once the leader has caught up.
- Otherwise ``assignor.assign`` (incremental cooperative) spreads the configured work,
  starting from what each member reports it runs; under the eager protocol
  ``eager_assign`` deals all of it anew (every member stopped its work to join).
"""

from __future__ import annotations

from collections.abc import Sequence

from oncelog.connect.distributed.assignor import AssignorState, assign
from oncelog.connect.distributed.connect_protocol import (
    CONFIG_MISMATCH,
    ConnectAssignment,
    ConnectProtocolVersion,
    decode_metadata,
    encode_assignment,
)
from oncelog.connect.distributed.eager_assignor import eager_assign
from oncelog.connect.runtime.work import EMPTY, Work


def leader_assignments(
    version: ConnectProtocolVersion,
    leader_id: str,
    members: Sequence[tuple[str, bytes]],
    config_offset: int,
    configured: Work,
    assignor: AssignorState,
    *,
    now_ms: int,
    max_delay_ms: int,
    generation: int,
    last_completed_generation: int,
) -> tuple[dict[str, bytes], AssignorState]:
    """(encoded assignment per member, the assignor's next state)."""
    states = {m: decode_metadata(data)[1] for m, data in members}
    leader_url = states[leader_id].url
    if any(ws.config_offset > config_offset for ws in states.values()):
        mismatch = encode_assignment(
            ConnectAssignment(int(version), CONFIG_MISMATCH, leader_id, leader_url, config_offset)
        )
        return dict.fromkeys(states, mismatch), assignor
    if version is ConnectProtocolVersion.EAGER:
        return {
            m: encode_assignment(
                ConnectAssignment(int(version), 0, leader_id, leader_url, config_offset, work)
            )
            for m, work in eager_assign(states, configured).items()
        }, assignor
    reported = {
        m: ws.assignment.assigned if ws.assignment is not None else EMPTY
        for m, ws in states.items()
    }
    plans, assignor = assign(
        assignor,
        reported,
        configured,
        now_ms=now_ms,
        max_delay_ms=max_delay_ms,
        generation=generation,
        last_completed_generation=last_completed_generation,
    )
    encoded = {
        m: encode_assignment(
            ConnectAssignment(
                int(version),
                0,
                leader_id,
                leader_url,
                config_offset,
                p.start,
                p.stop,
                p.delay_ms,
            )
        )
        for m, p in plans.items()
    }
    return encoded, assignor
