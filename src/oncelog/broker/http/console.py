"""The web console's HTML: one page whose panels htmx refreshes every few seconds.

Server-rendered with f-strings and ``html.escape``; the only script is the vendored htmx
(``static/htmx.min.js``) and a few lines below. Read-only, except the abort button of a
hanging transaction, shown only when ``console.allow.abort`` is true, behind a
confirmation (``hx-confirm``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Protocol

from oncelog.broker.state_view import (
    BrokerStateView,
    GroupLag,
    Hanging,
    PartitionState,
    TxnView,
)
from oncelog.hanging import REASONS

REFRESH = "every 2s"
CHART_SAMPLES = 150  # at one sample a second: the last 2.5 minutes
CHART_TOPICS = 6  # lines drawn: the topics with the most LSO lag
CHART_W, CHART_H = 720, 200  # the whole SVG, axes included
# Plot area margins: room for the y tick labels and axis title (left), time labels (bottom).
CHART_LEFT, CHART_RIGHT, CHART_TOP, CHART_BOTTOM = 64, 12, 10, 38
MAX_TOPICS = 300  # topic rows listed on the page
PARTITIONS_PER_TOPIC = 100  # partition rows under one topic
# A topic with records is idle when its newest record is older than this (the timestamp
# retention.ms judges by); one without records is always idle.
IDLE_AFTER_MS = 10 * 60 * 1000


class StateSource(Protocol):
    """What the panels read: ``BrokerStateView``, or a caller's filtered view of it."""

    def now_ms(self) -> int: ...
    def partitions(self, *, internal: bool = False) -> list[PartitionState]: ...
    def transactions(self) -> list[TxnView]: ...
    def hanging(
        self,
        partitions: list[PartitionState] | None = None,
        transactions: list[TxnView] | None = None,
    ) -> list[Hanging]: ...
    def group_lag(self) -> list[GroupLag]: ...


@dataclass(frozen=True, slots=True)
class LagSample:
    at_ms: int
    by_topic: dict[str, int]  # topic -> sum of its partitions' LSO lag (offsets)


class LagHistory:
    """LSO lag per topic over time, sampled once a second by the listener."""

    def __init__(self, view: BrokerStateView, maxlen: int = CHART_SAMPLES) -> None:
        self._view = view
        self.samples: deque[LagSample] = deque(maxlen=maxlen)

    def sample(self) -> None:
        by_topic: dict[str, int] = {}
        for p in self._view.partitions():
            by_topic[p.topic] = by_topic.get(p.topic, 0) + p.lso_lag
        self.samples.append(LagSample(self._view.now_ms(), by_topic))


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>oncelog console</title>
<script src="/static/htmx.min.js"></script>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }}
h1 {{ font-size: 1.3em; }} h2 {{ font-size: 1.1em; margin: 1.2em 0 .4em; }}
table {{ border-collapse: collapse; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 3px 10px; text-align: right; }}
th {{ background: #f4f4f4; }} td.id, th.id {{ text-align: left; word-break: break-all; }}
tr.hanging td {{ background: #fde2e2; }} tr.open td {{ background: #fff6e0; }}
.flag {{ color: #b00; font-weight: bold; }}
.lagging {{ color: #b60; font-weight: bold; }} .muted {{ color: #888; }}
#abort-result {{ margin: .5em 0; font-weight: bold; }}
button.expand {{ border: none; background: none; cursor: pointer; padding: 0 .4em 0 0; }}
button.expand::before {{ content: "\\25B8"; }}
tr.topic.open button.expand::before {{ content: "\\25BE"; }}
tr.parts-row {{ display: none; }} tr.topic.open + tr.parts-row {{ display: table-row; }}
tr.parts-row > td {{ padding: 0 0 6px 2em; text-align: left; }}
/* Internal and idle topics: hidden unless the box above the panel is ticked (CSS only,
   so the choice survives the panel's refreshes). */
#partitions tr.quiet {{ display: none; }}
#show-quiet:checked ~ #partitions tr.topic.quiet {{ display: table-row; }}
#show-quiet:checked ~ #partitions tr.topic.quiet.open + tr.parts-row {{ display: table-row; }}
#show-quiet:checked ~ #partitions .quiet-note {{ display: none; }}
svg text {{ font: 11px system-ui, sans-serif; fill: #555; }}
</style>
</head>
<body hx-headers='{{"X-Oncelog-Token": "{token}"}}'>
<h1>oncelog console</h1>
<p class="muted">Broker {broker}. Panels refresh every 2 s.
Abort of hanging transactions: {abort_state}.</p>
<div id="abort-result"></div>
<h2>Hanging transactions</h2>
<div id="hanging" hx-get="/console/hanging" hx-trigger="{refresh}">{hanging}</div>
<h2>LSO lag per topic</h2>
<div id="chart" hx-get="/console/chart" hx-trigger="load, {refresh}">{chart}</div>
<h2>Consumer groups</h2>
<div id="groups" hx-get="/console/groups" hx-trigger="{refresh}">{groups}</div>
<h2>Topics</h2>
<input type="checkbox" id="show-quiet"><label for="show-quiet"> show internal and idle topics</label>
<div id="partitions" hx-get="/console/partitions" hx-trigger="{refresh}">{partitions}</div>
<h2>Transactions</h2>
<div id="transactions" hx-get="/console/transactions" hx-trigger="{refresh}">{transactions}</div>
<script>
// Show the abort endpoint's refusal or failure text too (htmx swaps only 2xx by default).
document.body.addEventListener("htmx:beforeSwap", function (e) {{
  if (e.detail.target.id === "abort-result") {{ e.detail.shouldSwap = true; e.detail.isError = false; }}
}});
// Expanded topics stay expanded across the panel's refreshes (each swap replaces the rows).
var openTopics = new Set();
function applyOpen() {{
  document.querySelectorAll("#partitions tr.topic").forEach(function (row) {{
    var open = openTopics.has(row.dataset.topic);
    row.classList.toggle("open", open);
    row.querySelector("button.expand").setAttribute("aria-expanded", String(open));
  }});
}}
document.body.addEventListener("click", function (e) {{
  var b = e.target.closest("button.expand");
  if (!b) return;
  var t = b.closest("tr.topic").dataset.topic;
  if (openTopics.has(t)) openTopics.delete(t); else openTopics.add(t);
  applyOpen();
}});
document.body.addEventListener("htmx:afterSwap", function (e) {{
  if (e.detail.target.id === "partitions") applyOpen();
}});
</script>
</body>
</html>
"""


def page(
    view: StateSource,
    history: LagHistory,
    broker: str,
    allow_abort: bool,
    token: str = "",
    visible_topic: Callable[[str], bool] | None = None,
) -> str:
    """The console page; ``token`` (the listener's per-start CSRF token) is sent back by
    htmx on every request the page makes, and required by the abort action.
    ``visible_topic``: the topics the chart may draw (all when None)."""
    return PAGE.format(
        token=escape(token),
        broker=escape(broker),
        abort_state="enabled (console.allow.abort=true)"
        if allow_abort
        else "disabled (set console.allow.abort=true to enable)",
        refresh=REFRESH,
        chart=chart(history, visible_topic),
        hanging=hanging_table(view, allow_abort),
        transactions=transactions_table(view),
        partitions=partitions_table(view),
        groups=groups_table(view),
    )


def _table(
    headers: list[str], rows: list[str], empty: str, ids: tuple[int, ...] = (0,), cls: str = ""
) -> str:
    """``ids``: the columns of names, aligned left like their cells."""
    if not rows:
        return f'<p class="muted">{escape(empty)}</p>'
    head = "".join(
        f'<th class="id">{escape(h)}</th>' if i in ids else f"<th>{escape(h)}</th>"
        for i, h in enumerate(headers)
    )
    klass = f' class="{cls}"' if cls else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _age(ms: int) -> str:
    return f"{ms / 1000:.1f} s"


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _lag_cell(lag: int) -> str:
    return f'<span class="lagging">{lag}</span>' if lag else "0"


# -- topics -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicRollup:
    """One topic's partitions summed up, as the topics panel shows it."""

    topic: str
    partitions: list[PartitionState]  # by index
    internal: bool
    idle: bool

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions)

    @property
    def log_end(self) -> int:
        return sum(p.high_watermark for p in self.partitions)

    @property
    def lso_lag(self) -> int:
        return sum(p.lso_lag for p in self.partitions)

    @property
    def open_txns(self) -> int:
        return sum(len(p.open_txns) for p in self.partitions)

    @property
    def newest_timestamp(self) -> int:
        return max((p.newest_timestamp for p in self.partitions), default=-1)

    @property
    def quiet(self) -> bool:
        """Hidden behind the panel's toggle."""
        return self.internal or self.idle


def is_idle(parts: list[PartitionState], now_ms: int) -> bool:
    """Nothing to look at: no open transaction and no LSO lag, and either no records
    (every partition empty, or emptied by retention) or none newer than IDLE_AFTER_MS by
    the record timestamps. A topic whose newest timestamp is unknown counts as active."""
    if any(p.open_txns or p.lso_lag for p in parts):
        return False
    if all(p.high_watermark == p.log_start_offset for p in parts):
        return True
    newest = max((p.newest_timestamp for p in parts), default=-1)
    return newest >= 0 and now_ms - newest > IDLE_AFTER_MS


def topic_rollups(parts: list[PartitionState], now_ms: int) -> list[TopicRollup]:
    """One per topic: shown ones before internal and idle ones, then by LSO lag (most
    first) and name."""
    by_topic: dict[str, list[PartitionState]] = {}
    for p in parts:
        by_topic.setdefault(p.topic, []).append(p)
    rollups = [
        TopicRollup(
            topic, sorted(ps, key=lambda p: p.partition), ps[0].internal, is_idle(ps, now_ms)
        )
        for topic, ps in by_topic.items()
    ]
    return sorted(rollups, key=lambda r: (r.quiet, -r.lso_lag, r.topic))


def _last_write(newest_timestamp: int, now_ms: int) -> str:
    return f"{_age(max(0, now_ms - newest_timestamp))} ago" if newest_timestamp >= 0 else "-"


def partitions_table(view: StateSource) -> str:
    """One row per topic, each expandable to its partitions. Internal and idle topics are
    rendered too, hidden by CSS until the page's "show internal and idle topics" box is
    ticked (of the topics the caller may describe: ``view`` is already filtered)."""
    now = view.now_ms()
    rollups = topic_rollups(view.partitions(internal=True), now)
    shown = rollups[:MAX_TOPICS]
    rows = []
    for r in shown:
        quiet = " quiet" if r.quiet else ""
        kind = "internal" if r.internal else "idle" if r.idle else ""
        note = f' <span class="muted">({kind})</span>' if kind else ""
        t = escape(r.topic)
        rows.append(
            f'<tr class="topic{quiet}" data-topic="{t}">'
            f'<td class="id"><button class="expand" aria-expanded="false" '
            f'title="its partitions"></button>{t}{note}</td>'
            f"<td class='count'>{len(r.partitions)}</td>"
            f"<td class='size'>{_bytes(r.size_bytes)}</td><td class='hw'>{r.log_end}</td>"
            f"<td class='lag'>{_lag_cell(r.lso_lag)}</td>"
            f"<td class='open-txns'>{r.open_txns}</td>"
            f"<td>{_last_write(r.newest_timestamp, now)}</td></tr>"
            f'<tr class="parts-row{quiet}"><td colspan="7">{_partition_rows(r)}</td></tr>'
        )
    table = _table(
        ["topic", "partitions", "size", "log end (Σ)", "LSO lag (Σ)", "open txns", "last write"],
        rows,
        "no topics",
    )
    quiet_count = sum(1 for r in shown if r.quiet)
    if quiet_count:
        table += (
            f'<p class="muted quiet-note">{quiet_count} internal or idle topics hidden (idle: '
            f"no open transaction, and no records or none written in the last "
            f"{IDLE_AFTER_MS // 60_000} min)</p>"
        )
    if len(rollups) > len(shown):
        table += (
            f'<p class="muted">{len(rollups) - len(shown)} more topics without more LSO lag '
            "are not shown (see /metrics)</p>"
        )
    return table


def _partition_rows(r: TopicRollup) -> str:
    parts = r.partitions
    if len(parts) > PARTITIONS_PER_TOPIC:  # the lagging ones are worth the room
        parts = sorted(parts, key=lambda p: (-p.lso_lag, p.partition))[:PARTITIONS_PER_TOPIC]
        parts.sort(key=lambda p: p.partition)
    t = escape(r.topic)
    rows = [
        f'<tr class="partition" data-topic="{t}" data-partition="{p.partition}">'
        f"<td>{p.partition}</td><td>{p.log_start_offset}</td>"
        f"<td class='hw'>{p.high_watermark}</td><td class='lso'>{p.last_stable_offset}</td>"
        f"<td class='lag'>{_lag_cell(p.lso_lag)}</td><td>{len(p.open_txns)}</td>"
        f"<td>{_bytes(p.size_bytes)}</td></tr>"
        for p in parts
    ]
    table = _table(
        ["partition", "log start", "high watermark", "LSO", "LSO lag", "open txns", "size"],
        rows,
        "no partitions",
        ids=(),
        cls="parts",
    )
    if len(r.partitions) > len(parts):
        table += (
            f'<p class="muted">{len(r.partitions) - len(parts)} more partitions without more '
            "LSO lag are not shown (see /metrics)</p>"
        )
    return table


# -- transactions -------------------------------------------------------------------------

HANGING_FIRST, OPEN_NEXT, THE_REST = 0, 1, 2


def transaction_order(
    txns: list[TxnView], hanging_kinds: dict[str, str]
) -> list[tuple[int, TxnView]]:
    """(group, transaction) in the table's order: hanging ones first, then the other open
    ones, then the rest (completed, empty, dead). Oldest first within a group: by start
    time for open ones, by the coordinator's last update for the others."""

    def key(t: TxnView) -> tuple[int, int, str]:
        if t.transactional_id in hanging_kinds:
            group = HANGING_FIRST
        else:
            group = OPEN_NEXT if t.is_open else THE_REST
        since = t.start_ms if group != THE_REST and t.start_ms >= 0 else t.updated_ms
        return group, since, t.transactional_id

    keyed = sorted(((key(t), t) for t in txns), key=lambda kt: kt[0])
    return [(k[0], t) for k, t in keyed]


def transactions_table(view: StateSource) -> str:
    now = view.now_ms()
    txns: list[TxnView] = view.transactions()
    # Overdue ones carry their transactional id; an orphaned one has none to match.
    kinds = {
        h.transactional_id: h.kind
        for h in view.hanging(transactions=txns)
        if h.transactional_id is not None
    }
    rows = []
    for group, t in transaction_order(txns, kinds):
        parts = ", ".join(f"{escape(tp)}-{i}" for tp, i in t.partitions) or "-"
        flag = ""
        if group == HANGING_FIRST:
            kind = kinds[t.transactional_id]
            flag = f' <span class="flag" title="{escape(REASONS[kind])}">HANGING ({kind})</span>'
        cls = ("hanging", "open", "")[group]
        rows.append(
            f'<tr class="{cls}" data-transactional-id="{escape(t.transactional_id)}">'
            f'<td class="id">{escape(t.transactional_id)}{flag}</td>'
            f"<td>{t.producer_id}</td><td>{t.producer_epoch}</td>"
            f"<td class='state'>{escape(t.state)}</td>"
            f"<td>{_age(t.age_ms(now)) if t.is_open else '-'}</td>"
            f"<td>{t.timeout_ms} ms</td><td class='id'>{parts}</td></tr>"
        )
    return _table(
        ["transactional id", "producer id", "epoch", "state", "age", "timeout", "partitions"],
        rows,
        "no transactional ids",
        ids=(0, 6),
    )


def hanging_table(view: StateSource, allow_abort: bool) -> str:
    hanging: list[Hanging] = view.hanging()
    rows = []
    for h in hanging:
        who = escape(h.transactional_id) if h.transactional_id else "(not tracked)"
        what = f"producer {h.producer_id} in {h.topic}-{h.partition}"
        if allow_abort:
            action = (
                '<button class="abort" hx-post="/console/abort" hx-target="#abort-result" '
                f'hx-vals=\'{{"topic": "{escape(h.topic)}", "partition": "{h.partition}", '
                f'"producer_id": "{h.producer_id}"}}\' '
                f'hx-confirm="Abort the transaction of {escape(what)}? '
                'Its records will never be visible to read_committed consumers.">abort</button>'
            )
        else:
            action = (
                '<button class="abort" disabled title="console.allow.abort=false">abort</button>'
            )
        rows.append(
            f'<tr class="hanging" data-producer-id="{h.producer_id}">'
            f'<td class="id">{escape(h.topic)}</td><td>{h.partition}</td>'
            f"<td>{h.producer_id}</td><td>{h.producer_epoch}</td>"
            f'<td class="id">{who}</td><td>{h.first_offset}</td><td>{_age(h.age_ms)}</td>'
            f'<td title="{escape(h.reason)}">{h.kind}</td><td>{action}</td></tr>'
        )
    return _table(
        [
            "topic",
            "partition",
            "producer id",
            "epoch",
            "transactional id",
            "first offset",
            "age",
            "kind",
            "",
        ],
        rows,
        "no hanging transactions",
        ids=(0, 4),
    )


def _lag_with_time(lag: int, lag_ms: int | None) -> str:
    when = f' <span class="age muted">({_age(lag_ms)})</span>' if lag and lag_ms is not None else ""
    return f'<span class="n">{_lag_cell(lag)}</span>{when}'


def groups_table(view: StateSource) -> str:
    """Committed offsets with two lags, since the broker cannot know a group's isolation
    level (a consumer never tells it): to the LSO, what a read_committed group has left
    (0 once caught up, even behind an open transaction), and to the log end, Kafka's LAG
    (kafka-consumer-groups.sh, and /metrics), what a read_uncommitted group has left.
    Each with how long ago the first record not consumed yet was written, when known."""
    now = view.now_ms()
    lags: list[GroupLag] = view.group_lag()
    rows = [
        f'<tr data-group="{escape(g.group_id)}" data-topic="{escape(g.topic)}" '
        f'data-partition="{g.partition}">'
        f'<td class="id">{escape(g.group_id)}</td><td>{escape(g.state)}</td>'
        f'<td class="id">{escape(g.topic)}</td><td>{g.partition}</td>'
        f"<td class='committed'>{g.committed}</td><td class='lso'>{g.lso}</td>"
        f"<td class='hw'>{g.high_watermark}</td>"
        f"<td class='lag-lso'>{_lag_with_time(g.lag_to_lso, g.lag_ms(now, to_lso=True))}</td>"
        f"<td class='lag-end'>{_lag_with_time(g.lag, g.lag_ms(now, to_lso=False))}</td></tr>"
        for g in lags
    ]
    table = _table(
        [
            "group",
            "state",
            "topic",
            "partition",
            "committed",
            "LSO",
            "high watermark",
            "lag to LSO (read_committed)",
            "lag to end",
        ],
        rows,
        "no committed offsets",
        ids=(0, 2),
    )
    if rows:
        table += (
            '<p class="muted">A group\'s isolation level is not known to the broker: a '
            "read_committed group is caught up at lag to LSO 0, a read_uncommitted one at "
            "lag to end 0 (Kafka's LAG). In brackets: how long ago the first record not "
            "consumed yet was written.</p>"
        )
    return table


_COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")
# Seconds between time labels: the first that gives at most six (samples are 1 s apart, so
# a chart of two samples still has a whole second to label).
_TIME_STEPS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600)


def y_ticks(top: int) -> list[int]:
    """0 and a few round values (1, 2 or 5 times a power of ten, whole offsets) up to
    the first one at or above ``top``, which becomes the axis' maximum."""
    step = 1
    while True:
        for m in (1, 2, 5):
            if top / (step * m) <= 4:
                s = step * m
                return list(range(0, -(-top // s) * s + 1, s))
        step *= 10


def x_ticks(t0_ms: int, t1_ms: int) -> list[int]:
    """Round wall-clock times (ms) within [t0, t1], at most six."""
    span_s = max(1, (t1_ms - t0_ms) // 1000)
    step = next((s for s in _TIME_STEPS_S if span_s / s <= 5), _TIME_STEPS_S[-1]) * 1000
    first = -(-t0_ms // step) * step
    return list(range(first, t1_ms + 1, step))


def _count(n: int) -> str:
    for suffix, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size and n % (size // 10) == 0:
            return f"{n / size:g}{suffix}"
    return str(n)


def chart(history: LagHistory, visible_topic: Callable[[str], bool] | None = None) -> str:
    """An inline SVG line chart of the sampled LSO lag, one line per topic (of those
    ``visible_topic`` allows, when given), with a y axis in offsets and an x axis of
    wall-clock times (UTC, the broker's clock)."""
    samples = list(history.samples)
    if len(samples) < 2:
        return '<p class="muted">collecting samples…</p>'
    totals: dict[str, int] = {}
    for s in samples:
        for topic, lag in s.by_topic.items():
            totals[topic] = max(totals.get(topic, 0), lag)
    if visible_topic is not None:
        totals = {t: lag for t, lag in totals.items() if visible_topic(t)}
    topics = sorted(totals, key=lambda t: (-totals[t], t))[:CHART_TOPICS]
    yt = y_ticks(max([1, *(totals[t] for t in topics)]))
    top = yt[-1]
    t0, t1 = samples[0].at_ms, samples[-1].at_ms
    span = max(1, t1 - t0)
    left, right = CHART_LEFT, CHART_W - CHART_RIGHT
    upper, lower = CHART_TOP, CHART_H - CHART_BOTTOM

    def x_of(at_ms: int) -> float:
        return left + (at_ms - t0) / span * (right - left)

    def y_of(value: int) -> float:
        return lower - value / top * (lower - upper)

    axes = [
        f'<line x1="{left}" y1="{lower}" x2="{right}" y2="{lower}" stroke="#999"/>',
        f'<line x1="{left}" y1="{upper}" x2="{left}" y2="{lower}" stroke="#999"/>',
    ]
    for v in yt:
        y = y_of(v)
        axes.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text class="y-tick" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_count(v)}</text>"
        )
    for at in x_ticks(t0, t1):
        x = x_of(at)
        label = time.strftime("%H:%M:%S", time.gmtime(at / 1000))
        axes.append(
            f'<line x1="{x:.1f}" y1="{lower}" x2="{x:.1f}" y2="{lower + 4}" stroke="#999"/>'
            f'<text class="x-tick" x="{x:.1f}" y="{lower + 16}" text-anchor="middle">'
            f"{label}</text>"
        )
    mid_y = (upper + lower) / 2
    axes.append(
        f'<text class="axis-title y-title" x="14" y="{mid_y:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {mid_y:.0f})">LSO lag (offsets)</text>'
        f'<text class="axis-title x-title" x="{(left + right) / 2:.0f}" y="{CHART_H - 4}" '
        f'text-anchor="middle">time (UTC)</text>'
    )
    lines = []
    legend = []
    for i, topic in enumerate(topics):
        colour = _COLOURS[i % len(_COLOURS)]
        points = " ".join(
            f"{x_of(s.at_ms):.1f},{y_of(s.by_topic.get(topic, 0)):.1f}" for s in samples
        )
        lines.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}">'
            f"<title>{escape(topic)}</title></polyline>"
        )
        now = samples[-1].by_topic.get(topic, 0)
        legend.append(
            f'<span style="color:{colour}">■</span> {escape(topic)}: '
            f'<span class="chart-lag" data-topic="{escape(topic)}">{now}</span>'
        )
    return (
        f'<svg width="{CHART_W}" height="{CHART_H}" viewBox="0 0 {CHART_W} {CHART_H}" '
        f'role="img" aria-label="LSO lag in offsets per topic over time" '
        f'style="border:1px solid #ddd; background:#fcfcfc">'
        f"{''.join(axes)}{''.join(lines)}</svg>"
        f'<p class="muted">last {(t1 - t0) / 1000:.0f} s · {" · ".join(legend)}</p>'
    )
