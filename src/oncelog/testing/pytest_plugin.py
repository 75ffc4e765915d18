"""pytest plugin: a real oncelog broker for your exactly-once integration tests.

Installed with oncelog (entry point ``pytest11``); no Docker, no JVM. Fixtures:

- ``oncelog_broker``: the session's broker (started once, on a free port, in a temp dir).
  If a test killed or stopped it, the next test gets it back, restarted on the same port
  and data dir.
- ``oncelog_session_broker``: the same broker, for your own session-scoped fixtures.
- ``oncelog_function_broker``: a fresh broker for one test (nothing shared).
- ``oncelog_bootstrap``: ``host:port`` of ``oncelog_broker``.
- ``oncelog_topic``: a fresh topic on ``oncelog_broker``; ``@pytest.mark.oncelog_topic(
  partitions=3, config={...})`` shapes it.

- ``oncelog_fault_proxy``: a broker of this test alone behind a
  :class:`oncelog.testing.fault_proxy.FaultProxy`; the broker advertises the proxy, so
  every client connection goes through it. ``.bootstrap`` is the proxy's address,
  ``.proxy`` injects network faults (dropped responses, late requests, resets,
  blackholes, latency, a bandwidth cap), ``.broker`` is the broker.

Fault tests: ``broker.kill()`` (SIGKILL, nothing flushed), ``broker.start()`` (same port and
data), ``broker.restart()`` (clean stop + start). Checks: :func:`read_committed` and
:func:`assert_exactly_once`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from oncelog.embedded import EmbeddedBroker
from oncelog.testing.fault_proxy import FaultProxy

if TYPE_CHECKING:
    from oncelog.testing.verify import Record

# The client layer is imported on first use: it pulls in kio (and so hypothesis), which must
# not be imported before pytest has loaded hypothesis' own plugin.

__all__ = [
    "BrokerBehindProxy",
    "OncelogBroker",
    "assert_exactly_once",
    "read_committed",
]

# One partition per internal topic: a test broker starts in well under a second.
FAST_START = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"}
SETTINGS_INI = "oncelog_broker_settings"


class OncelogBroker(EmbeddedBroker):
    """An :class:`oncelog.embedded.EmbeddedBroker` with test conveniences."""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 20.0) -> OncelogBroker:
        """Start (or start again after ``kill()``/``stop()``: same port, same data)."""
        super().start(timeout)
        return self

    def ensure_running(self) -> OncelogBroker:
        return self if self.running else self.start()

    def create_topic(
        self,
        name: str | None = None,
        *,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
    ) -> str:
        """Create a topic (a fresh unique name unless given) and return its name."""
        from oncelog.client.admin import Admin
        from oncelog.client.config import ClientConfig

        name = name or f"test-{uuid.uuid4().hex[:12]}"
        with Admin(ClientConfig(self.bootstrap)) as admin:
            admin.create_topics([name], partitions, config=config, exist_ok=False)
        return name

    def read_committed(self, topic: str, timeout: float = 30.0) -> list[Record]:
        return read_committed(self.bootstrap, topic, timeout=timeout)


def read_committed(bootstrap: str, topic: str, *, timeout: float = 30.0) -> list[Record]:
    """Every record a read_committed consumer sees in ``topic``, up to its last stable
    offset, ordered by partition and offset. Aborted and open transactions are not in it."""
    from oncelog.testing.verify import read_topic

    return read_topic(bootstrap, topic, isolation="read_committed", timeout=timeout)


def _value(record: Any) -> Any:
    from oncelog.testing.verify import Record

    return record.value if isinstance(record, Record) else record


def assert_exactly_once(
    actual: Iterable[Any],
    expected: Iterable[Any],
    *,
    key: Callable[[Any], Any] = _value,
) -> None:
    """Fail unless every expected item appears exactly once in ``actual``: no duplicates,
    no gaps (missing items), nothing unexpected. ``actual`` may be :class:`Record` s (compared
    by value unless ``key`` says otherwise) or plain items."""
    from oncelog.testing.verify import compare

    got = [key(a) for a in actual]
    want = list(expected)
    verdict = compare(want, got)
    if not verdict.ok:
        details = "; ".join(verdict.examples)
        raise AssertionError(f"{verdict.line()}" + (f" ({details})" if details else ""))


def _settings(config: pytest.Config) -> dict[str, str]:
    out = dict(FAST_START)
    for line in config.getini(SETTINGS_INI):
        k, sep, v = str(line).partition("=")
        if not sep:
            raise pytest.UsageError(f"{SETTINGS_INI}: expected key=value, got {line!r}")
        out[k.strip()] = v.strip()
    return out


def _running_broker(config: pytest.Config, base: Path) -> Iterator[OncelogBroker]:
    """A started broker in ``base`` (data/ and broker.log), stopped after its scope."""
    broker = OncelogBroker(base / "data", settings=_settings(config), log_path=base / "broker.log")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@dataclass
class BrokerBehindProxy:
    """A broker that advertises ``proxy``'s address: clients bootstrap at ``bootstrap``."""

    broker: OncelogBroker
    proxy: FaultProxy

    @property
    def bootstrap(self) -> str:
        return self.proxy.bootstrap


def broker_behind_proxy(
    base: Path, settings: Mapping[str, str] | None = None, *, seed: int | None = None
) -> BrokerBehindProxy:
    """Start a proxy, then a broker in ``base`` advertising it (``stop_behind_proxy`` ends
    both). The proxy listens first: the broker must know its port."""
    proxy = FaultProxy(seed=seed).start()
    try:
        broker = OncelogBroker(
            base / "data",
            settings={
                **dict(settings or FAST_START),
                "advertised.listeners": f"PLAINTEXT://{proxy.bootstrap}",
            },
            log_path=base / "broker.log",
        ).start()
    except BaseException:
        proxy.close()
        raise
    proxy.set_upstream(broker.host, broker.port)
    return BrokerBehindProxy(broker, proxy)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(SETTINGS_INI, "oncelog test broker settings (key=value lines)", type="linelist")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "oncelog_topic(partitions=1, config=None): shape of the oncelog_topic fixture"
    )


@pytest.fixture(scope="session")
def oncelog_session_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OncelogBroker]:
    yield from _running_broker(request.config, tmp_path_factory.mktemp("oncelog"))


@pytest.fixture
def oncelog_broker(oncelog_session_broker: OncelogBroker) -> OncelogBroker:
    """The session's broker, running (restarted if an earlier test killed it)."""
    return oncelog_session_broker.ensure_running()


@pytest.fixture
def oncelog_function_broker(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[OncelogBroker]:
    """A broker of this test alone, in the test's tmp_path."""
    yield from _running_broker(request.config, tmp_path / "oncelog")


@pytest.fixture
def oncelog_fault_proxy(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[BrokerBehindProxy]:
    """A broker of this test alone behind a fault-injecting proxy."""
    pair = broker_behind_proxy(tmp_path / "oncelog", _settings(request.config))
    try:
        yield pair
    finally:
        pair.proxy.close()
        pair.broker.stop()


@pytest.fixture
def oncelog_bootstrap(oncelog_broker: OncelogBroker) -> str:
    return oncelog_broker.bootstrap


@pytest.fixture
def oncelog_topic(request: pytest.FixtureRequest, oncelog_broker: OncelogBroker) -> str:
    marker = request.node.get_closest_marker("oncelog_topic")
    kwargs = dict(marker.kwargs) if marker else {}
    return oncelog_broker.create_topic(
        partitions=int(kwargs.get("partitions", 1)), config=kwargs.get("config")
    )
