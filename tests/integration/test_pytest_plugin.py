"""The pytest plugin (oncelog.testing.pytest_plugin), run the way users run it: pytester
starts an inner pytest session on test files written here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PLUGIN = ("-p", "oncelog.testing.pytest_plugin")
DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider", *args, timeout=240)


def test_fixtures_give_a_session_broker_a_fresh_topic_and_a_function_broker(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        import pytest
        from oncelog.client.admin import Admin
        from oncelog.client.config import ClientConfig

        seen = []

        @pytest.mark.oncelog_topic(partitions=3)
        def test_one(oncelog_broker, oncelog_bootstrap, oncelog_topic):
            assert oncelog_bootstrap == oncelog_broker.bootstrap
            with Admin(ClientConfig(oncelog_bootstrap)) as admin:
                assert admin.topics()[oncelog_topic] == 3
            seen.append((oncelog_bootstrap, oncelog_topic))

        def test_two(oncelog_bootstrap, oncelog_topic, oncelog_function_broker):
            with Admin(ClientConfig(oncelog_bootstrap)) as admin:
                assert admin.topics()[oncelog_topic] == 1
            # the session broker again, a new topic; the function broker is another one
            assert seen[0][0] == oncelog_bootstrap and seen[0][1] != oncelog_topic
            assert oncelog_function_broker.bootstrap != oncelog_bootstrap
            with Admin(ClientConfig(oncelog_function_broker.bootstrap)) as admin:
                assert oncelog_topic not in admin.topics()
        """
    )
    run(pytester).assert_outcomes(passed=2)


def test_assert_exactly_once_reports_duplicates_and_gaps(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from confluent_kafka import Producer
        from oncelog.testing.pytest_plugin import assert_exactly_once, read_committed

        def produce(bootstrap, topic, values):
            p = Producer({"bootstrap.servers": bootstrap})
            for v in values:
                p.produce(topic, value=v)
            p.flush()

        def test_exact(oncelog_bootstrap, oncelog_topic):
            produce(oncelog_bootstrap, oncelog_topic, [b"a", b"b", b"c"])
            records = read_committed(oncelog_bootstrap, oncelog_topic)
            assert [(r.partition, r.offset) for r in records] == [(0, 0), (0, 1), (0, 2)]
            assert_exactly_once(records, [b"a", b"b", b"c"])

        def test_duplicate(oncelog_bootstrap, oncelog_topic):
            produce(oncelog_bootstrap, oncelog_topic, [b"a", b"b", b"b", b"c"])
            assert_exactly_once(read_committed(oncelog_bootstrap, oncelog_topic), [b"a", b"b", b"c"])

        def test_gap(oncelog_bootstrap, oncelog_topic):
            produce(oncelog_bootstrap, oncelog_topic, [b"a", b"c"])
            assert_exactly_once(read_committed(oncelog_bootstrap, oncelog_topic), [b"a", b"b", b"c"])
        """
    )
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: exactly-once VIOLATED: 3 in, 4 out, 1 duplicates, 0 missing"
            " (duplicate b'b' x2)",
            "*AssertionError: exactly-once VIOLATED: 3 in, 2 out, 0 duplicates, 1 missing"
            " (missing b'b')",
        ]
    )


def test_killed_session_broker_is_back_for_the_next_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        from confluent_kafka import Producer
        from oncelog.testing.pytest_plugin import read_committed

        state = {}

        def test_kill(oncelog_broker, oncelog_topic):
            p = Producer({"bootstrap.servers": oncelog_broker.bootstrap})
            p.produce(oncelog_topic, value=b"kept")
            p.flush()
            state["topic"], state["bootstrap"] = oncelog_topic, oncelog_broker.bootstrap
            oncelog_broker.kill()
            assert not oncelog_broker.running

        def test_after(oncelog_broker):
            assert oncelog_broker.running
            assert oncelog_broker.bootstrap == state["bootstrap"]
            values = [r.value for r in read_committed(state["bootstrap"], state["topic"])]
            assert values == [b"kept"]
        """
    )
    run(pytester).assert_outcomes(passed=2)


def doc_files(text: str) -> dict[str, str]:
    """The python blocks of docs/testing.md whose first line is ``# <file name>.py``."""
    out = {}
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        first = block.splitlines()[0]
        if re.fullmatch(r"# \w+\.py", first):
            out[first[2:]] = block
    return out


def test_docs_example_runs(pytester: pytest.Pytester) -> None:
    files = doc_files(DOC.read_text())
    assert sorted(files) == ["eos_copier.py", "test_eos_copier.py", "test_lost_answers.py"]
    for name, source in files.items():
        pytester.makepyfile(**{name[:-3]: source})
    run(pytester).assert_outcomes(passed=3)


def test_installed_entry_point_and_explicit_p_register_the_plugin_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As installed (entry point, named after the module) plus ``-p`` (our addopts): one
    registration, no "Plugin already registered" error."""
    site = pytester.mkdir("site")
    info = site / "oncelog_fake-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: oncelog-fake\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[pytest11]\noncelog.testing.pytest_plugin = oncelog.testing.pytest_plugin\n"
    )
    import os

    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    pytester.makepyfile(
        """
        def test_plugin_once(request):
            pm = request.config.pluginmanager
            plugins = [p for p in pm.get_plugins() if getattr(p, "__name__", "") ==
                       "oncelog.testing.pytest_plugin"]
            assert len(plugins) == 1
            assert pm.get_plugin("oncelog.testing.pytest_plugin") is plugins[0]

        def test_fixture_works(oncelog_bootstrap):
            assert oncelog_bootstrap.startswith("127.0.0.1:")
        """
    )
    run(pytester).assert_outcomes(passed=2)
    # and without -p, from the entry point alone
    pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120).assert_outcomes(passed=2)
