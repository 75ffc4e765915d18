"""KIP-618 fencing requests between workers and their signatures (KIP-507).

- :meth:`FencingRequests.fence_zombies`: the leader's side of ``PUT /connectors/{c}/fence``
  (a round of ``leader_fencing``);
- :meth:`FencingRequests.request_fencing`: a worker asks the leader for a round (itself
  when it leads, else the leader's signed internal endpoint);
- :meth:`FencingRequests.check_internal_request`: an internal request not signed with
  the current session key is refused with Kafka's status codes
  (``request_signing.refusal``). Only the ``sessioned`` protocol distributes keys;
  without it Kafka checks nothing.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from typing import TYPE_CHECKING

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.distributed import internal_requests, request_signing
from oncelog.connect.distributed.connect_protocol import ConnectProtocolVersion
from oncelog.connect.distributed.errors import NotLeaderError
from oncelog.connect.distributed.leader_fencing import Fencer, LeaderFencing
from oncelog.connect.distributed.requests import Kind

if TYPE_CHECKING:
    from oncelog.connect.distributed.herder import Herder


class FencingRequests:
    def __init__(self, herder: Herder, group_id: str, fence_producers: Fencer) -> None:
        self.herder = herder
        self.rounds = LeaderFencing(
            group_id,
            herder.configs.snapshot,
            herder.configs.read_to_end,
            herder.configs.writer.write_task_count,
            lambda fn: herder.submit(fn, Kind.LOCAL),
            fence_producers,
            self.require_leader,
        )

    def require_leader(self) -> None:
        group = self.herder.group
        if not group.is_leader:
            raise NotLeaderError(group.leader_url)

    def fence_zombies(self, name: str) -> concurrent.futures.Future[None]:
        """Leader, on the herder thread: make sure the connector's previous task
        generation is fenced out and a task-count record follows its latest task
        configs. Returns the round's future."""
        self.require_leader()
        snapshot = self.herder.configs.snapshot()
        if not snapshot.contains(name):
            raise ConnectRestException(404, f"Connector {name} not found")
        config = snapshot.connector_configs[name]
        if self.herder.plugins.connector_type(config) != "source":
            raise ConnectRestException(400, f"Connector {name} is not a source connector")
        return self.rounds.fence_zombies(name, config)

    def request_fencing(self, name: str) -> concurrent.futures.Future[None]:
        """Startup step 2: ask the leader for a round of fencing of ``name``."""
        herder = self.herder
        if herder.group.is_leader:
            try:
                return self.fence_zombies(name)
            except Exception as exc:
                failed: concurrent.futures.Future[None] = concurrent.futures.Future()
                failed.set_exception(exc)
                return failed
        key = herder.configs.snapshot().session_key
        signing_key = None if key is None else key.key
        if (
            herder.group.current_protocol is ConnectProtocolVersion.SESSIONED
            and signing_key is None
        ):
            signing_key = b""  # no key yet: the leader refuses, and the start is retried
        return internal_requests.request_fencing(
            herder.group.leader_url,
            name,
            signing_key,
            herder.config.settings.signature_algorithm,
            herder.rest_ssl,
        )

    def check_internal_request(self, body: bytes, headers: Mapping[str, str]) -> None:
        herder = self.herder
        if herder.group.current_protocol is not ConnectProtocolVersion.SESSIONED:
            return
        key = herder.configs.snapshot().session_key
        refused = request_signing.refusal(
            None if key is None else key.key,
            body,
            headers,
            list(herder.config.settings.verification_algorithms),
        )
        if refused is not None:
            raise ConnectRestException(*refused)
