"""holds_more_entries: a response's array entries, counted two levels deep, without encoding."""

from __future__ import annotations

from kio.schema.describe_configs.v4 import response as dc
from kio.schema.errors import ErrorCode

from oncelog.protocol.messages import holds_more_entries, make


def _response(resources: int, configs_each: int) -> object:
    config = make(dc.DescribeConfigsResourceResult, name="a", value="1", synonyms=())
    result = make(
        dc.DescribeConfigsResult,
        error_code=ErrorCode.none,
        resource_type=2,
        resource_name="t",
        configs=(config,) * configs_each,
    )
    return make(dc.DescribeConfigsResponse, results=(result,) * resources)


def test_entries_are_counted_two_levels_deep() -> None:
    assert not holds_more_entries(_response(10, 89), 10 + 10 * 89)
    assert holds_more_entries(_response(10, 90), 10 + 10 * 89)  # 910 > 900
    assert holds_more_entries(_response(901, 0), 900)
    assert not holds_more_entries(_response(0, 0), 0)
