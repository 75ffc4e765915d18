"""`oncelog groups ...` (alias `consumer-groups`): Kafka's kafka-consumer-groups.sh: list,
describe with lag, reset-offsets, delete, delete-offsets."""

from __future__ import annotations

import datetime
import re
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from oncelog.cli.common import (
    Bootstrap,
    CommandConfig,
    Output,
    admin,
    emit,
    fail,
    failures,
    parse_topic_partitions,
    progress,
    table,
)
from oncelog.client.admin import EARLIEST, LATEST, Admin, Offsets, TopicPartition
from oncelog.client.groups import GroupAdmin, GroupDescription

app = typer.Typer(no_args_is_help=True, help="List, describe, reset and delete consumer groups.")

Group = Annotated[str, typer.Option("--group", "-g", help="The consumer group id.")]
Topics = Annotated[
    list[str] | None,
    typer.Option("--topic", "-t", help="TOPIC or TOPIC:PARTITION,... (repeatable)."),
]
# Offsets committed per OffsetCommit while resetting: the progress bar's step.
RESET_CHUNK = 100


@app.command("list")
def list_(
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only groups in this state (repeatable; any case)."),
    ] = None,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """List consumer groups, their states and protocols (classic or consumer, KIP-848)."""
    with failures("cannot list groups"):
        groups = GroupAdmin(admin(bootstrap, config_file)).list_groups()
    if state:
        # kafka-consumer-groups.sh --list --state: case-insensitive state names
        wanted = {s.lower() for s in state}
        groups = [g for g in groups if g.state.lower() in wanted]
    data = [{"group": g.group_id, "state": g.state, "type": g.group_type} for g in groups]
    rows = [(g.group_id, g.state, g.group_type) for g in groups]
    emit(output, data, table(None, ("group", "state", "type"), rows))


def _lag_rows(a: Admin, groups: GroupAdmin, group_id: str) -> tuple[str, list[dict[str, object]]]:
    desc = groups.describe_groups([group_id])[group_id]
    committed = groups.committed(group_id)
    owner = {tp: m for m in desc.members for tp in m.assignment}
    tps = sorted(set(committed) | set(owner))
    ends = a.list_offsets(tps, LATEST, read_committed=False)
    stable = a.list_offsets(tps, LATEST, read_committed=True)
    rows: list[dict[str, object]] = []
    for tp in tps:
        current = committed.get(tp)
        m = owner.get(tp)
        rows.append(
            {
                "group": group_id,
                "topic": tp[0],
                "partition": tp[1],
                "current_offset": current,
                "log_end_offset": ends[tp],
                "last_stable_offset": stable[tp],
                "lag": None if current is None else ends[tp] - current,
                "consumer_id": m.member_id if m else None,
                "host": m.host if m else None,
                "client_id": m.client_id if m else None,
            }
        )
    return desc.state, rows


@app.command()
def describe(
    group: Annotated[
        str | None, typer.Option("--group", "-g", help="The consumer group id.")
    ] = None,
    all_groups: Annotated[
        bool, typer.Option("--all-groups", help="Every group (as kafka-consumer-groups.sh).")
    ] = False,
    members: Annotated[
        bool,
        typer.Option("--members", help="The members: consumer id, host, client id, partitions."),
    ] = False,
    state: Annotated[
        bool,
        typer.Option(
            "--state", help="The group: coordinator, assignment strategy, state, members."
        ),
    ] = False,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """Committed offsets, log end offsets and lag of each partition, with the owning member;
    or the members (--members), or the group's state (--state)."""
    if (group is None) == (not all_groups):
        fail("give --group or --all-groups", 2)
    if members and state:
        fail("--members and --state exclude each other", 2)
    a = admin(bootstrap, config_file)
    groups = GroupAdmin(a)
    with failures(f"cannot describe group {group!r}" if group else "cannot describe groups"):
        ids = [group] if group is not None else sorted(g.group_id for g in groups.list_groups())
        if members or state:
            described = groups.describe_groups(ids)
    results: list[tuple[str, dict[str, Any], Table]] = []
    for gid in ids:
        if members or state:
            d = described[gid]
            if d.state == "Dead" and group is not None:
                fail(f"consumer group {gid!r} does not exist")
            results.append(_members(d) if members else _state(d))
            continue
        with failures(f"cannot describe group {gid!r}"):
            gstate, rows = _lag_rows(a, groups, gid)
        if gstate == "Dead" and not rows and group is not None:
            fail(f"consumer group {gid!r} does not exist")
        columns = ("topic", "partition", "current offset", "log end offset", "lag", "consumer id")
        keys = ("topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id")
        render = table(f"group {gid} ({gstate})", columns, [[r[k] for k in keys] for r in rows])
        results.append((gid, {"group": gid, "state": gstate, "partitions": rows}, render))
    if output == "json":
        data = [r[1] for r in results]
        emit(output, data[0] if group is not None else data, None)
        return
    for _, _, render in results:
        emit(output, None, render)


def _members(d: GroupDescription) -> tuple[str, dict[str, Any], Table]:
    # kafka-consumer-groups.sh --describe --members: GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS
    rows: list[dict[str, Any]] = [
        {
            "consumer_id": m.member_id,
            "host": m.host,
            "client_id": m.client_id,
            "partitions": len(m.assignment),
            "assignment": [f"{t}-{p}" for t, p in sorted(m.assignment)],
        }
        for m in sorted(d.members, key=lambda m: m.member_id)
    ]
    render = table(
        f"group {d.group_id} ({d.state})",
        ("consumer id", "host", "client id", "#partitions", "assignment"),
        [
            (
                r["consumer_id"],
                r["host"],
                r["client_id"],
                r["partitions"],
                ",".join(r["assignment"]),
            )
            for r in rows
        ],
    )
    return d.group_id, {"group": d.group_id, "state": d.state, "members": rows}, render


def _state(d: GroupDescription) -> tuple[str, dict[str, Any], Table]:
    # kafka-consumer-groups.sh --describe --state: COORDINATOR ASSIGNMENT-STRATEGY STATE #MEMBERS
    data = {
        "group": d.group_id,
        "coordinator": d.coordinator,
        "assignment_strategy": d.protocol,
        "state": d.state,
        "members": len(d.members),
    }
    render = table(
        None,
        ("group", "coordinator", "assignment strategy", "state", "#members"),
        [list(data.values())],
    )
    return d.group_id, data, render


def _parse_datetime(value: str) -> int:
    """Kafka's --to-datetime: ``YYYY-MM-DDTHH:mm:SS[.sss][zone]``, UTC when no zone."""
    try:
        dt = datetime.datetime.fromisoformat(value)
    except ValueError:
        fail(f"--to-datetime {value}: expected YYYY-MM-DDTHH:mm:SS[.sss][+HH:MM]", 2)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    return int(dt.timestamp() * 1000)


_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?"
)


def _parse_duration(value: str) -> int:
    """Kafka's --by-duration, a java.time.Duration (``PnDTnHnMnS``, e.g. PT10M, P1DT2H), in ms."""
    match = _DURATION.fullmatch(value.upper())
    if match is None or not any(match.groupdict().values()) or value.upper().endswith("T"):
        fail(f"--by-duration {value}: expected PnDTnHnMnS, e.g. PT10M or P1DT12H", 2)
    d, h, m, s = (float(match.group(k) or 0) for k in "dhms")
    return int((((d * 24 + h) * 60 + m) * 60 + s) * 1000)


def _scope(
    a: Admin, groups: GroupAdmin, group: str, topics: list[str] | None, all_topics: bool
) -> list[TopicPartition]:
    known = a.topics()
    if all_topics:
        return sorted(groups.committed(group))
    out: list[TopicPartition] = []
    for topic, parts in parse_topic_partitions(topics or []):
        if topic not in known:
            fail(f"unknown topic {topic!r}")
        out += [(topic, p) for p in (parts if parts is not None else range(known[topic]))]
    return sorted(set(out))


@app.command("reset-offsets")
def reset_offsets(
    group: Group,
    topic: Topics = None,
    all_topics: Annotated[
        bool, typer.Option("--all-topics", help="Every partition the group has offsets for.")
    ] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_offset: Annotated[int | None, typer.Option("--to-offset")] = None,
    to_datetime: Annotated[
        str | None, typer.Option("--to-datetime", help="YYYY-MM-DDTHH:mm:SS.sss, UTC by default.")
    ] = None,
    shift_by: Annotated[int | None, typer.Option("--shift-by")] = None,
    to_current: Annotated[
        bool, typer.Option("--to-current", help="The committed offsets (log end without one).")
    ] = False,
    by_duration: Annotated[
        str | None,
        typer.Option("--by-duration", help="PnDTnHnMnS: the first offset at or after now - it."),
    ] = None,
    from_file: Annotated[
        Path | None,
        typer.Option(
            "--from-file",
            help="A reset plan in CSV, as --export writes it: topic,partition,offset lines "
            "(or group,topic,partition,offset; other groups' lines are ignored).",
        ),
    ] = None,
    export: Annotated[
        bool,
        typer.Option("--export", help="Print the plan as CSV (topic,partition,offset)."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the plan (the default).")
    ] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Commit the new offsets.")] = False,
    read_committed: Annotated[
        bool,
        typer.Option(
            "--read-committed/--read-uncommitted",
            help="--to-latest means the last stable offset (LSO) or the high watermark.",
        ),
    ] = False,
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
    output: Output = "table",
) -> None:
    """Reset a group's committed offsets (the group must have no active members)."""
    modes = [
        to_earliest,
        to_latest,
        to_offset is not None,
        to_datetime is not None,
        shift_by is not None,
        to_current,
        by_duration is not None,
        from_file is not None,
    ]
    if sum(modes) != 1:
        fail(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime,"
            " --shift-by, --to-current, --by-duration, --from-file",
            2,
        )
    duration_ms = _parse_duration(by_duration) if by_duration is not None else None
    plan = _read_reset_plan(from_file, group) if from_file is not None else None
    if plan is not None:
        if topic or all_topics:
            fail("--from-file takes its partitions from the file: drop --topic/--all-topics", 2)
    elif bool(topic) == all_topics:
        fail("give --topic (repeatable) or --all-topics", 2)
    if dry_run and execute:
        fail("--dry-run and --execute exclude each other", 2)
    a = admin(bootstrap, config_file)
    groups = GroupAdmin(a)
    with failures(f"cannot reset offsets of group {group!r}"):
        state = groups.describe_groups([group])[group].state
        if execute and state not in ("Empty", "Dead"):
            fail(
                f"assignments can only be reset if group {group!r} is inactive, "
                f"but its state is {state}"
            )
        tps = (
            _plan_scope(a, plan)
            if plan is not None
            else _scope(a, groups, group, topic, all_topics)
        )
        current = groups.committed(group)
        start = a.list_offsets(tps, EARLIEST, read_committed=False)
        end = a.list_offsets(tps, LATEST, read_committed=read_committed)
        target: Offsets
        if to_earliest:
            target = start
        elif to_latest:
            target = end
        elif to_offset is not None:
            target = {tp: to_offset for tp in tps}
        elif to_datetime is not None or duration_ms is not None:
            ts = (
                _parse_datetime(to_datetime)
                if to_datetime is not None
                else int(time.time() * 1000) - (duration_ms or 0)
            )
            at = a.list_offsets(tps, ts, read_committed=False)
            target = {tp: end[tp] if at[tp] < 0 else at[tp] for tp in tps}
        elif plan is not None:
            target = plan
        elif to_current:
            # Kafka's --to-current: the committed offset, the log end offset without one
            target = {tp: current.get(tp, end[tp]) for tp in tps}
        else:
            assert shift_by is not None
            target = {tp: current.get(tp, start[tp]) + shift_by for tp in tps}
        # Kafka clamps every new offset into [log start, end].
        new = {tp: min(max(target[tp], start[tp]), end[tp]) for tp in tps}
        if execute:
            chunks = [tps[i : i + RESET_CHUNK] for i in range(0, len(tps), RESET_CHUNK)]
            with progress(len(tps), f"resetting {group}") as advance:
                for chunk in chunks:
                    groups.alter_offsets(group, {tp: new[tp] for tp in chunk})
                    advance(len(chunk))
    rows = [
        {
            "group": group,
            "topic": t,
            "partition": p,
            "previous_offset": current.get((t, p)),
            "new_offset": new[(t, p)],
        }
        for t, p in tps
    ]
    if export:
        # kafka-consumer-groups.sh --export: one group, so no group column
        typer.echo("".join(f"{t},{p},{new[(t, p)]}\n" for t, p in tps), nl=False)
        return
    title = f"group {group}: {'new offsets committed' if execute else 'dry run, nothing committed'}"
    render = table(
        title,
        ("topic", "partition", "previous offset", "new offset"),
        [(r["topic"], r["partition"], r["previous_offset"], r["new_offset"]) for r in rows],
    )
    emit(output, rows, render)


def _read_reset_plan(path: Path, group: str) -> Offsets:
    """A reset plan in Kafka's CSV (``ConsumerGroupCommand.parseResetPlan``): every line
    ``topic,partition,offset``, or every line ``group,topic,partition,offset`` of which
    only ``group``'s count. A malformed line is an error naming it."""
    try:
        text = path.read_text()
    except OSError as exc:
        fail(f"cannot read reset plan {path}: {exc.strerror or exc}", 2)
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        fail(f"reset plan {path} is empty", 2)
    width = len(lines[0][1].split(","))
    plan: Offsets = {}
    for n, line in lines:
        cells = [c.strip() for c in line.split(",")]
        if width not in (3, 4) or len(cells) != width:
            fail(
                f"{path}:{n}: expected topic,partition,offset or "
                f"group,topic,partition,offset, got {line!r}",
                2,
            )
        if width == 4:
            if cells[0] != group:
                continue
            cells = cells[1:]
        topic, partition, offset = cells
        if not topic or not partition.isdigit() or not offset.lstrip("-").isdigit():
            fail(f"{path}:{n}: expected a topic, a partition and an offset, got {line!r}", 2)
        plan[(topic, int(partition))] = int(offset)
    if not plan:
        fail(f"reset plan {path} has no offsets for group {group!r}", 2)
    return plan


def _plan_scope(a: Admin, plan: Offsets) -> list[TopicPartition]:
    known = a.topics()
    for topic, partition in sorted(plan):
        if topic not in known:
            fail(f"unknown topic {topic!r}")
        if partition >= known[topic]:
            fail(f"topic {topic!r} has no partition {partition}")
    return sorted(plan)


@app.command()
def delete(
    group: Annotated[list[str], typer.Option("--group", "-g", help="Repeatable.")],
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """Delete consumer groups (with no active members) and their offsets."""
    with failures("cannot delete group"):
        GroupAdmin(admin(bootstrap, config_file)).delete_groups(group)
    for g in sorted(set(group)):
        typer.echo(f"deleted group {g}")


@app.command("delete-offsets")
def delete_offsets(
    group: Group,
    topic: Annotated[
        list[str], typer.Option("--topic", "-t", help="TOPIC or TOPIC:PARTITION,... (repeatable).")
    ],
    bootstrap: Bootstrap = "127.0.0.1:9092",
    config_file: CommandConfig = None,
) -> None:
    """Delete a group's committed offsets of some topics or partitions (OffsetDelete)."""
    a = admin(bootstrap, config_file)
    with failures(f"cannot delete offsets of group {group!r}"):
        tps = _scope(a, GroupAdmin(a), group, topic, False)
        GroupAdmin(a).delete_offsets(group, tps)
    for t, p in tps:
        typer.echo(f"deleted offset of {group} for {t}-{p}")
