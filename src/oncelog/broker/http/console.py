"""The web console's HTML: one page whose panels htmx refreshes every few seconds.

Server-rendered with f-strings and ``html.escape``; the only script is the vendored htmx
(``static/htmx.min.js``) and a few lines below. Read-only, except the abort button of a
hanging transaction, shown only when ``console.allow.abort`` is true, behind a
confirmation (``hx-confirm``).
"""

from __future__ import annotations

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

REFRESH = "every 2s"
CHART_SAMPLES = 150  # at one sample a second: the last 2.5 minutes
CHART_TOPICS = 6  # lines drawn: the topics with the most LSO lag
CHART_W, CHART_H = 720, 180
MAX_ROWS = 500  # partitions listed on the page


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
h1 {{ font-size: 1.3em; }} h2 {{ font-size: 1.1em; margin-top: 1.6em; }}
table {{ border-collapse: collapse; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 3px 10px; text-align: right; }}
th {{ background: #f4f4f4; }} td.id, th.id {{ text-align: left; word-break: break-all; }}
tr.hanging td {{ background: #fde2e2; }} .flag {{ color: #b00; font-weight: bold; }}
.lagging {{ color: #b60; font-weight: bold; }} .muted {{ color: #888; }}
#abort-result {{ margin: .5em 0; font-weight: bold; }}
</style>
</head>
<body hx-headers='{{"X-Oncelog-Token": "{token}"}}'>
<h1>oncelog console</h1>
<p class="muted">Broker {broker}. Panels refresh every 2 s.
Abort of hanging transactions: {abort_state}.</p>
<div id="abort-result"></div>
<h2>LSO lag (offsets, per topic)</h2>
<div id="chart" hx-get="/console/chart" hx-trigger="load, {refresh}">{chart}</div>
<h2>Hanging transactions</h2>
<div id="hanging" hx-get="/console/hanging" hx-trigger="{refresh}">{hanging}</div>
<h2>Transactions</h2>
<div id="transactions" hx-get="/console/transactions" hx-trigger="{refresh}">{transactions}</div>
<h2>Topics and partitions</h2>
<div id="partitions" hx-get="/console/partitions" hx-trigger="{refresh}">{partitions}</div>
<h2>Consumer groups</h2>
<div id="groups" hx-get="/console/groups" hx-trigger="{refresh}">{groups}</div>
<script>
// Show the abort endpoint's refusal or failure text too (htmx swaps only 2xx by default).
document.body.addEventListener("htmx:beforeSwap", function (e) {{
  if (e.detail.target.id === "abort-result") {{ e.detail.shouldSwap = true; e.detail.isError = false; }}
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


def _table(headers: list[str], rows: list[str], empty: str, ids: int = 1) -> str:
    if not rows:
        return f'<p class="muted">{escape(empty)}</p>'
    head = "".join(
        f'<th class="id">{escape(h)}</th>' if i < ids else f"<th>{escape(h)}</th>"
        for i, h in enumerate(headers)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _age(ms: int) -> str:
    return f"{ms / 1000:.1f} s"


def partitions_table(view: StateSource) -> str:
    parts: list[PartitionState] = view.partitions()
    # Lagging partitions first; a page refreshed every 2 s shows at most MAX_ROWS.
    shown = sorted(parts, key=lambda p: (-p.lso_lag, p.topic, p.partition))[:MAX_ROWS]
    rows = []
    for p in shown:
        lag = f'<span class="lagging">{p.lso_lag}</span>' if p.lso_lag else "0"
        rows.append(
            f'<tr data-topic="{escape(p.topic)}" data-partition="{p.partition}">'
            f'<td class="id">{escape(p.topic)}</td><td>{p.partition}</td>'
            f"<td>{p.log_start_offset}</td><td class='hw'>{p.high_watermark}</td>"
            f"<td class='lso'>{p.last_stable_offset}</td><td class='lag'>{lag}</td>"
            f"<td>{len(p.open_txns)}</td></tr>"
        )
    table = _table(
        ["topic", "partition", "log start", "high watermark", "LSO", "LSO lag", "open txns"],
        rows,
        "no topics",
    )
    if len(parts) > len(shown):
        table += (
            f'<p class="muted">{len(parts) - len(shown)} more partitions without more LSO lag '
            "are not shown (see /metrics)</p>"
        )
    return table


def transactions_table(view: StateSource) -> str:
    now = view.now_ms()
    txns: list[TxnView] = view.transactions()
    hanging_ids = {h.transactional_id for h in view.hanging(transactions=txns)}
    rows = []
    for t in txns:
        flagged = t.transactional_id in hanging_ids
        parts = ", ".join(f"{escape(tp)}-{i}" for tp, i in t.partitions) or "-"
        flag = ' <span class="flag">HANGING</span>' if flagged else ""
        rows.append(
            f'<tr class="{"hanging" if flagged else ""}" '
            f'data-transactional-id="{escape(t.transactional_id)}">'
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
    )


def groups_table(view: StateSource) -> str:
    lags: list[GroupLag] = view.group_lag()
    rows = [
        f'<tr><td class="id">{escape(g.group_id)}</td><td>{escape(g.state)}</td>'
        f'<td class="id">{escape(g.topic)}</td><td>{g.partition}</td>'
        f"<td>{g.committed}</td><td>{g.high_watermark}</td><td>{g.lag}</td></tr>"
        for g in lags
    ]
    return _table(
        ["group", "state", "topic", "partition", "committed", "high watermark", "lag"],
        rows,
        "no committed offsets",
    )


_COLOURS = ("#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")


def chart(history: LagHistory, visible_topic: Callable[[str], bool] | None = None) -> str:
    """An inline SVG line chart of the sampled LSO lag, one line per topic (of those
    ``visible_topic`` allows, when given)."""
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
    top = max([1, *(totals[t] for t in topics)])
    t0, t1 = samples[0].at_ms, samples[-1].at_ms
    span = max(1, t1 - t0)

    def xy(s: LagSample, topic: str) -> str:
        x = (s.at_ms - t0) / span * CHART_W
        y = CHART_H - s.by_topic.get(topic, 0) / top * (CHART_H - 10)
        return f"{x:.1f},{y:.1f}"

    lines = []
    legend = []
    for i, topic in enumerate(topics):
        colour = _COLOURS[i % len(_COLOURS)]
        points = " ".join(xy(s, topic) for s in samples)
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
        f'style="border:1px solid #ddd; background:#fcfcfc">'
        f'<text x="4" y="12" font-size="11" fill="#888">max {top}</text>{"".join(lines)}</svg>'
        f'<p class="muted">last {(t1 - t0) / 1000:.0f} s · {" · ".join(legend)}</p>'
    )
