"""DescribeTopicPartitions pagination (KIP-966), as Kafka's KRaftMetadataCache pages."""

from __future__ import annotations

from oncelog.broker.apis.describe_topic_partitions import Page, PageEntry, plan_page

COUNTS = {"a": 3, "b": 2, "c": 1}


def page(names: list[str], cursor: tuple[str, int] | None, limit: int) -> Page:
    return plan_page(names, COUNTS.get, cursor, limit)


def test_a_topic_cut_short_becomes_the_cursor_and_the_next_page_resumes_there() -> None:
    first = page(["a", "b", "c"], None, 4)
    assert first == Page([PageEntry("a", range(0, 3)), PageEntry("b", range(0, 1))], ("b", 1))
    second = page(["b", "c"], ("b", 1), 4)
    assert second == Page([PageEntry("b", range(1, 2)), PageEntry("c", range(0, 1))], None)


def test_a_full_page_ending_on_a_topic_boundary_points_at_the_next_topic() -> None:
    assert page(["a", "b"], None, 3) == Page([PageEntry("a", range(0, 3))], ("b", 0))
    assert page(["a"], None, 3) == Page([PageEntry("a", range(0, 3))], None)


def test_unknown_topics_take_no_room_and_a_cursor_past_the_end_gives_no_partitions() -> None:
    assert page(["a", "nope", "c"], None, 4) == Page(
        [PageEntry("a", range(0, 3)), PageEntry("nope", None), PageEntry("c", range(0, 1))], None
    )
    assert page(["c"], ("c", 5), 10) == Page([PageEntry("c", range(5, 1))], None)
    assert list(range(5, 1)) == []


def test_a_limit_of_one_walks_every_partition() -> None:
    seen = []
    cursor = None
    names = ["a", "b", "c"]
    while True:
        current = page([n for n in names if cursor is None or n >= cursor[0]], cursor, 1)
        seen += [(e.name, i) for e in current.entries for i in e.partitions or ()]
        if current.next_cursor is None:
            break
        cursor = current.next_cursor
    assert seen == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("c", 0)]
