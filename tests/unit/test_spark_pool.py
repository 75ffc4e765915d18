"""oncelog.spark.pool: keyed, bounded reuse of clients; closed on error and at exit."""

from __future__ import annotations

import pytest

from oncelog.spark.pool import ClientPool, config_key, pooled


class Client:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False
        self.resets = 0

    def close(self) -> None:
        self.closed = True


def test_reuses_by_key_bounds_idle_clients_and_closes_at_exit() -> None:
    pool = ClientPool(max_idle=2)
    a = pool.take("a", lambda: Client("a1"))
    pool.give("a", a, a.close)
    assert pool.take("b", lambda: Client("b1")).name == "b1"  # other key: a new client
    assert pool.take("a", lambda: Client("a2")) is a  # same key: reused
    assert (pool.created, pool.reused) == (2, 1)
    clients = [Client(f"c{i}") for i in range(3)]
    for c in clients:
        pool.give("c", c, c.close)
    assert len(pool) == 2 and clients[0].closed and not clients[1].closed  # LRU evicted
    pool.close_all()
    assert len(pool) == 0 and clients[1].closed and clients[2].closed


def test_pooled_returns_clean_clients_and_closes_failed_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import oncelog.spark.pool as module

    pool = ClientPool(max_idle=4)
    monkeypatch.setattr(module, "POOL", pool)
    reset = lambda c: setattr(c, "resets", c.resets + 1)  # noqa: E731
    with pooled("k", lambda: Client("one"), Client.close, reset) as first:
        pass
    with pooled("k", lambda: Client("two"), Client.close, reset) as again:
        assert again is first and again.resets == 1
    with pytest.raises(RuntimeError), pooled("k", lambda: Client("x"), Client.close) as broken:
        raise RuntimeError("boom")
    assert broken is first and broken.closed and len(pool) == 0
    assert config_key("consumer", {"b": 1, "a": "x"}) == ("consumer", (("a", "'x'"), ("b", "1")))
