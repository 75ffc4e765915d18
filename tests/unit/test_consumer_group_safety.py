"""KIP-848 reconciliation, simulated: members heartbeat in any order, reporting what they
own; a partition is never owned by two members at once, and once heartbeats settle the
group is Stable with every partition owned exactly once."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from oncelog.group import GroupConfig, GroupCoordinator
from oncelog.group.consumer_state import TopicInfo
from oncelog.group.messages import ConsumerHeartbeatReply, ConsumerHeartbeatRequest

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"a": TopicInfo(T1, 5), "b": TopicInfo(T2, 3)}

Action = tuple[str, int, str]  # (kind, member index, assignor)
actions = st.lists(
    st.tuples(
        st.sampled_from(["join", "hb", "hb", "hb", "leave"]),
        st.integers(0, 5),
        st.sampled_from(["uniform", "range"]),
    ),
    max_size=40,
)


class Client:
    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.owned: dict[uuid.UUID, tuple[int, ...]] = {}

    def request(self, **kw: object) -> ConsumerHeartbeatRequest:
        return ConsumerHeartbeatRequest(
            "g",
            self.member_id,
            self.epoch,
            owned=tuple(self.owned.items()),
            **kw,  # type: ignore[arg-type]
        )

    def apply(self, reply: ConsumerHeartbeatReply) -> None:
        assert reply.error.value == 0, reply
        self.epoch = reply.member_epoch
        if reply.assignment is not None:
            self.owned = dict(reply.assignment)


def owned_once(clients: list[Client]) -> set[tuple[uuid.UUID, int]]:
    seen: set[tuple[uuid.UUID, int]] = set()
    for c in clients:
        for t, ps in c.owned.items():
            for p in ps:
                assert (t, p) not in seen, f"{(t, p)} owned twice"
                seen.add((t, p))
    return seen


@settings(max_examples=200, deadline=None)
@given(actions)
def test_no_partition_is_ever_owned_twice_and_the_group_converges(script: list[Action]) -> None:
    c = GroupCoordinator(GroupConfig(consumer_session_timeout_ms=10**9))
    c.finish_load(0)
    clients: list[Client] = []
    now = 0
    for kind, index, assignor in script:
        now += 1
        if kind == "join" or not clients:
            client = Client(f"m{now}")
            req = ConsumerHeartbeatRequest(
                "g",
                client.member_id,
                0,
                rebalance_timeout_ms=10**9,
                subscribed_topic_names=("a", "b") if index % 2 else ("a",),
                server_assignor=assignor,
                owned=(),
            )
            reply = c.consumer_heartbeat(req, TOPICS, now).reply
            assert isinstance(reply, ConsumerHeartbeatReply)
            client.apply(reply)
            clients.append(client)
        elif kind == "leave":
            client = clients.pop(index % len(clients))
            req = ConsumerHeartbeatRequest("g", client.member_id, -1)
            c.consumer_heartbeat(req, TOPICS, now)
        else:
            client = clients[index % len(clients)]
            reply = c.consumer_heartbeat(client.request(), TOPICS, now).reply
            assert isinstance(reply, ConsumerHeartbeatReply)
            client.apply(reply)
        owned_once(clients)
    for _ in range(4):  # a few quiet rounds of heartbeats settle every member
        for client in clients:
            now += 1
            reply = c.consumer_heartbeat(client.request(), TOPICS, now).reply
            assert isinstance(reply, ConsumerHeartbeatReply)
            client.apply(reply)
            owned_once(clients)
    described = c.consumer_group_describe(["g"])[0]
    if not clients:
        assert described.state in ("Empty", "Dead")
        return
    assert described.state == "Stable"
    subscribed_b = any(m.subscribed_topic_names == ("a", "b") for m in described.members)
    expected = {(T1, p) for p in range(5)} | (
        {(T2, p) for p in range(3)} if subscribed_b else set()
    )
    assert owned_once(clients) == expected


names = st.text("ab.*(", max_size=3)
heartbeats = st.builds(
    ConsumerHeartbeatRequest,
    group_id=st.sampled_from(["", "g"]),
    member_id=st.sampled_from(["", "m1", "m2"]),
    member_epoch=st.integers(-3, 4),
    instance_id=st.sampled_from([None, "", "i1"]),
    rack_id=st.sampled_from([None, "", "r"]),
    rebalance_timeout_ms=st.integers(-2, 10),
    subscribed_topic_names=st.none() | st.lists(names, max_size=3).map(tuple),
    subscribed_topic_regex=st.none() | names,
    server_assignor=st.sampled_from([None, "", "uniform", "range", "x"]),
    owned=st.none()
    | st.lists(
        st.tuples(st.sampled_from([T1, T2]), st.lists(st.integers(-1, 6), max_size=3).map(tuple)),
        max_size=2,
    ).map(tuple),
    api_version=st.integers(0, 1),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(heartbeats, max_size=25))
def test_any_heartbeat_sequence_gets_an_answer(script: list[ConsumerHeartbeatRequest]) -> None:
    """Arbitrary field combinations: every heartbeat gets a reply (no exception), the
    coordinator's timers stay consistent, and describe still works."""
    c = GroupCoordinator(GroupConfig(consumer_session_timeout_ms=50))
    c.finish_load(0)
    for now, req in enumerate(script):
        reply = c.consumer_heartbeat(req, TOPICS, now * 7).reply
        assert isinstance(reply, ConsumerHeartbeatReply)
        c.tick(now * 7)
        deadline = c.next_deadline()
        assert deadline is None or isinstance(deadline, int)
    c.consumer_group_describe(["g", ""])
