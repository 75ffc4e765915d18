"""exactlyOnce.twoPhaseCommit on the executor: which tasks try a two-phase-commit
transaction, and how long a Python worker remembers a broker's refusal (no Spark, no broker)."""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode

from oncelog.client.producer import TwoPhaseCommitUnavailable
from oncelog.spark import two_phase
from oncelog.spark.options import parse_write_options


def opts(mode: str, bootstrap: str = "127.0.0.1:9092"):  # type: ignore[no-untyped-def]
    return parse_write_options(
        {"kafka.bootstrap.servers": bootstrap, "exactlyOnce.twoPhaseCommit": mode}
    )


REFUSAL = TwoPhaseCommitUnavailable("refused", ErrorCode.transactional_id_authorization_failed)


def test_modes_and_the_remembered_refusal() -> None:
    two_phase._refused.clear()
    auto, other = opts("auto", "10.0.0.1:9092"), opts("auto", "10.0.0.2:9092")
    assert two_phase.wanted(auto) and two_phase.wanted(opts("true"))
    assert not two_phase.wanted(opts("false"))
    two_phase.refused(auto, REFUSAL)
    assert not two_phase.wanted(auto)  # this worker's next tasks do not ask again
    assert two_phase.wanted(other)  # another cluster is asked
    assert two_phase.wanted(opts("true", "10.0.0.1:9092"))  # true always asks (and fails)
    two_phase._refused[two_phase._key(auto)] = time.monotonic() - two_phase.REFUSAL_TTL_S - 1
    assert two_phase.wanted(auto)  # asked again after a while (the broker may allow it now)
    two_phase._refused.clear()
