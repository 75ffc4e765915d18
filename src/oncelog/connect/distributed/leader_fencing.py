"""The leader's rounds of KIP-618 zombie fencing (``PUT /connectors/{c}/fence``).

A round for a connector pending fencing (``zombie_fencing.fencing_round``):

1. fence the previous generation's producers off the herder thread (the admin calls may
   take a while and must not stall rebalances or other requests);
2. back on the herder thread: read the config topic to its end; if the connector got
   newer task configs meanwhile, fail with 409; otherwise write the task-count record
   (read back by the config writer).

Concurrent requests for one connector share its round, as in Kafka (a second
``fence_producers`` after the first round's record would fence the new tasks). New task
configs cancel a round under way (:meth:`LeaderFencing.cancel`). Everything here runs on
the herder thread except the fencing itself.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence

from oncelog.connect.api.errors import ConnectRestException
from oncelog.connect.distributed import zombie_fencing
from oncelog.connect.storage.config_state import ClusterConfigSnapshot

log = logging.getLogger(__name__)

SKIP_FENCING_ENV = "ONCELOG_DEBUG_SKIP_ZOMBIE_FENCING"
"""Debug switch, off by default and never for production: set to ``1``, the leader
writes task-count records without fencing anything, so tests can show that their
exactly-once assertions fail without generational fencing."""

Fencer = Callable[[str, Mapping[str, str], Sequence[str]], None]
"""Fences out producers: (connector, connector config, transactional ids)."""


class LeaderFencing:
    def __init__(
        self,
        group_id: str,
        snapshot: Callable[[], ClusterConfigSnapshot],
        read_to_end: Callable[[], None],
        write_task_count: Callable[[str, int], None],
        on_herder: Callable[[Callable[[], None]], concurrent.futures.Future[None]],
        fence: Fencer,
        still_leader: Callable[[], None],
    ) -> None:
        self.group_id = group_id
        self.snapshot = snapshot
        self.read_to_end = read_to_end
        self.write_task_count = write_task_count
        self.on_herder = on_herder
        self.fence = fence
        self.still_leader = still_leader  # raises NotLeaderError when no longer
        self._rounds: dict[str, concurrent.futures.Future[None]] = {}
        self._generations: dict[str, int] = {}  # the task generation each round is for

    def fence_zombies(
        self, name: str, connector_config: Mapping[str, str]
    ) -> concurrent.futures.Future[None]:
        """Make sure ``name``'s previous task generation is fenced out and a task-count
        record follows its latest task configs; the future completes when it is so."""
        self.read_to_end()
        active = self._rounds.get(name)
        if active is not None:
            return active
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        round_ = zombie_fencing.fencing_round(self.snapshot(), self.group_id, name)
        if round_ is None:
            log.debug("no fencing needed for %s: its tasks are fenced already", name)
            done.set_result(None)
        elif not round_.fence_ids:
            log.info("writing task count %d for %s (nothing to fence)", round_.task_count, name)
            self.write_task_count(name, round_.task_count)
            done.set_result(None)
        else:
            self._rounds[name] = done
            self._generations[name] = round_.generation
            done.add_done_callback(lambda f: self._rounds.pop(name, None))
            threading.Thread(
                target=self._fence,
                args=(round_, dict(connector_config), done),
                name=f"fencing-{name}",
                daemon=True,
            ).start()
        return done

    def cancel(self, name: str) -> None:
        """New task configs for ``name``: a round under way for an older generation fails
        (409). The configs a round was started for may be seen as new by the herder
        after the round began (the round read them first): those cancel nothing."""
        active = self._rounds.get(name)
        newest = self.snapshot().task_config_generations.get(name, -1)
        if newest <= self._generations.get(name, -1):
            return
        if active is not None and not active.done():
            active.set_exception(
                ConnectRestException(
                    409,
                    "Failed to complete zombie fencing because a new set of task configs was "
                    "generated",
                )
            )

    def _fence(
        self,
        round_: zombie_fencing.FencingRound,
        connector_config: Mapping[str, str],
        done: concurrent.futures.Future[None],
    ) -> None:
        try:
            if os.environ.get(SKIP_FENCING_ENV) == "1":
                log.warning("%s=1: NOT fencing %s", SKIP_FENCING_ENV, list(round_.fence_ids))
            else:
                log.info("fencing out producers %s of %s", list(round_.fence_ids), round_.connector)
                self.fence(round_.connector, connector_config, round_.fence_ids)
            self.on_herder(lambda: self._record(round_, done)).result()
        except BaseException as exc:
            if not done.done():
                done.set_exception(exc)

    def _record(
        self, round_: zombie_fencing.FencingRound, done: concurrent.futures.Future[None]
    ) -> None:
        if done.done():
            return  # cancelled by new task configs
        name = round_.connector
        self.read_to_end()
        snapshot = self.snapshot()
        if snapshot.task_config_generations.get(name, -1) > round_.generation:
            raise ConnectRestException(
                409,
                "Fencing failed because new task configurations were generated for the connector",
            )
        self.still_leader()
        if name in snapshot.pending_fencing:
            self.write_task_count(name, round_.task_count)
        done.set_result(None)
