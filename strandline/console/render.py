"""The console's HTML: server-rendered, plain CSS, one small script.

Each page is a layout around a "live" fragment; the script re-fetches the fragment
(the same function renders both) every second or so and swaps it in, so the page
updates without a JavaScript build step or a second renderer in JS. Elements a test or
a script may want to read carry `data-*` attributes with the raw numbers.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from html import escape
from urllib.parse import quote, urlencode

from strandline import state_change_log as scl
from strandline.console.gather import (
    AclsView,
    Broker,
    BrokerView,
    ClusterView,
    GroupsView,
    Partition,
    PartitionView,
    ReassignmentsView,
    TimelineFilter,
    TimelineView,
    TopicConfigsView,
    TopicRow,
)
from strandline.console.messages import MessageQuery, MessagesView, Shown

DASH = "\u2014"
NAV = (
    ("cluster", "/", "Cluster"),
    ("topics", "/topics", "Topics"),
    ("groups", "/groups", "Consumer groups"),
    ("reassignments", "/reassignments", "Reassignments"),
    ("timeline", "/timeline", "State changes"),
    ("acls", "/acls", "ACLs"),
)

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d232a; background: #f6f7f9; }
header { background: #1d2b3a; color: #fff; padding: 8px 16px; display: flex; gap: 18px;
  align-items: center; }
header a { color: #c9d6e3; text-decoration: none; }
header a.on { color: #fff; font-weight: 600; border-bottom: 2px solid #6cb6ff; }
header .brand { font-weight: 700; color: #fff; margin-right: 12px; }
#conn { margin-left: auto; font-size: 12px; color: #9fb3c8; }
.stale #conn { color: #ffb4a9; }
.stale #conn::after { content: " \\2014 console unreachable, showing the last answer"; }
main { padding: 12px 16px; max-width: 1200px; }
h1 { font-size: 20px; margin: 8px 0 12px; }
h2 { font-size: 16px; margin: 18px 0 8px; }
table { border-collapse: collapse; background: #fff; margin-bottom: 12px; }
th, td { border: 1px solid #dde2e8; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #1b7f3b; } .bad { color: #b3261e; font-weight: 600; } .warn { color: #a15c00; }
.muted { color: #6b7785; } .small { font-size: 12px; }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 12px;
  background: #e3e8ee; margin-left: 4px; }
.badge.bad { background: #fde2df; } .badge.ok { background: #dcf3e3; }
.badge.warn { background: #fff0d6; }
.errors { background: #fff4f2; border: 1px solid #f3c4bd; padding: 6px 10px;
  margin-bottom: 10px; }
.headline { font-size: 16px; margin-bottom: 12px; }
.headline b { font-size: 20px; }
.replicas { background: #fff; border: 1px solid #dde2e8; padding: 10px 12px; }
.replica { display: grid; grid-template-columns: 190px 1fr 260px; gap: 12px;
  align-items: center; margin: 10px 0; }
.track { position: relative; height: 26px; background: #eef1f5; border-radius: 3px; }
.log { position: absolute; top: 3px; bottom: 3px; background: #7a8896; border-radius: 2px; }
.replica.isr .log { background: #2e7d32; }
.replica.out .log { background: #d08a16; }
.replica.down .log { background: #c4c9cf; }
.log.stale { background-image: repeating-linear-gradient(45deg, transparent 0 4px,
  rgba(255,255,255,.6) 4px 8px); }
.replica.isr .log.stale { background-color: #c4c9cf; }
ul.errors { list-style: none; }
.mark { position: absolute; top: -4px; bottom: -4px; width: 0; }
.mark.hw { border-left: 3px solid #1565c0; }
.mark.own { border-left: 2px dashed #0d1b2a; top: 0; bottom: 0; }
.legend span { margin-right: 14px; }
.swatch { display: inline-block; width: 12px; height: 12px; vertical-align: middle;
  margin-right: 4px; border-radius: 2px; }
tr.alarm td { background: #fff4f2; }
form.filter { margin-bottom: 10px; }
.charts { display: flex; gap: 14px; flex-wrap: wrap; margin: 10px 0; }
figure.chart { margin: 0; }
"""

SCRIPT = """
(function () {
  var live = document.getElementById('live');
  if (!live || !live.dataset.src) return;
  var every = Number(live.dataset.every || 1000);
  function tick() {
    fetch(live.dataset.src, {cache: 'no-store'})
      .then(function (r) { return r.text(); })
      .then(function (html) {
        live.innerHTML = html;
        document.body.classList.remove('stale');
      })
      .catch(function () { document.body.classList.add('stale'); })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids) or "\u2014"


def _opt(value: object | None) -> str:
    return "\u2014" if value is None else _e(value)


def _clock(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts).strftime("%H:%M:%S")


def partition_href(topic: str, partition: int) -> str:
    return f"/topics/{quote(topic, safe='')}/{partition}"


def topic_href(topic: str) -> str:
    return f"/topics/{quote(topic, safe='')}"


def layout(
    title: str,
    active: str,
    fragment: str,
    live_src: str | None = None,
    every_ms: int = 1000,
    above: str = "",
) -> str:
    """A whole page; `above` sits outside the live part (a form being typed into must
    not be replaced under the user's fingers)."""
    nav = "".join(
        f'<a href="{href}" class="{"on" if key == active else ""}">{label}</a>'
        for key, href, label in NAV
    )
    live_attrs = f' data-src="{_e(live_src)}" data-every="{every_ms}"' if live_src else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{_e(title)} \u2014 Strandline console</title>"
        f"<style>{CSS}</style></head><body>"
        f'<header><span class="brand">Strandline</span>{nav}'
        f'<span id="conn">{"live" if live_src else ""}</span></header>'
        f'<main><h1>{_e(title)}</h1>{above}<div id="live"{live_attrs}>{fragment}</div></main>'
        f"<script>{SCRIPT}</script></body></html>"
    )


def error_fragment(message: str) -> str:
    return f'<div class="errors" id="error"><span class="bad">error:</span> {_e(message)}</div>'


def _errors(errors: list[str]) -> str:
    if not errors:
        return ""
    items = "".join(f"<li>{_e(e)}</li>" for e in errors)
    return f'<div class="errors"><b>Some sources did not answer:</b><ul>{items}</ul></div>'


def _updated(ts: float) -> str:
    # The moment gathering started: nothing on the page is older, bar what says so.
    return f'<p class="muted small" id="taken-at" data-value="{ts:.3f}">as of {_clock(ts)}</p>'


def _age(ts: float | None, now: float) -> str:
    """When a value was read, and how long before the page's moment."""
    if ts is None:
        return ""
    ago = max(now - ts, 0.0)
    return (
        f'<span class="age small muted" data-at="{ts:.3f}">'
        f"read {_clock(ts)} ({ago:.0f} s ago)</span>"
    )


def _unknown(why: str) -> str:
    return (
        f'<span class="unknown warn" title="{_e(why)}">unknown</span> '
        f'<span class="muted small">({_e(why)})</span>'
    )


# --- charts --------------------------------------------------------------------------

CHART_W, CHART_H, CHART_PAD = 300, 70, 4
CHART_SPAN_S = 300.0  # the last five minutes


def chart(title: str, points: list[tuple[float, float]], now: float) -> str:
    """A small inline SVG line chart of the last CHART_SPAN_S seconds."""
    since = now - CHART_SPAN_S
    shown = [(t, v) for t, v in points if t >= since]
    slug = "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")
    if len(shown) < 2:
        body = (
            f'<text x="{CHART_W / 2}" y="{CHART_H / 2}" text-anchor="middle" '
            'class="muted" font-size="11">collecting…</text>'
        )
        low = high = last = None
    else:
        values = [v for _, v in shown]
        low, high, last = min(values), max(values), values[-1]
        top = high if high > low else low + 1
        inner_w, inner_h = CHART_W - 2 * CHART_PAD, CHART_H - 2 * CHART_PAD

        def x(t: float) -> float:
            return CHART_PAD + inner_w * (t - since) / CHART_SPAN_S

        def y(v: float) -> float:
            return CHART_PAD + inner_h * (1 - (v - low) / (top - low))

        line = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in shown)
        body = f'<polyline fill="none" stroke="#1565c0" stroke-width="1.5" points="{line}"/>'
    figures = f"now {_num(last)} · min {_num(low)} · max {_num(high)}" if last is not None else ""
    return (
        f'<figure class="chart" id="chart-{slug}" data-points="{len(shown)}" '
        f'data-last="{"" if last is None else f"{last:.3f}"}">'
        f'<figcaption class="small">{_e(title)} <span class="muted">{figures}, last 5 min'
        f"</span></figcaption>"
        f'<svg width="{CHART_W}" height="{CHART_H}" viewBox="0 0 {CHART_W} {CHART_H}" '
        f'role="img" aria-label="{_e(title)}"><rect width="100%" height="100%" '
        f'fill="#fff" stroke="#dde2e8"/>{body}</svg></figure>'
    )


def _num(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value:,.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.1f}"


def charts(series: dict[str, list[tuple[float, float]]], now: float) -> str:
    if not series:
        return ""
    return (
        '<div class="charts">'
        + "".join(chart(title, points, now) for title, points in series.items())
        + "</div>"
    )


# --- cluster -------------------------------------------------------------------------


def cluster_fragment(view: ClusterView) -> str:
    counts = {
        "partitions": len(view.partitions),
        "under-replicated": sum(p.under_replicated for p in view.partitions),
        "offline": sum(p.offline for p in view.partitions),
        "under-min-isr": sum(p.under_min_isr for p in view.partitions),
    }
    summary = (
        f'<p class="headline">controller <b id="controller" data-value="'
        f'{_e(view.controller if view.controller is not None else "")}">'
        f"{_opt(view.controller)}</b> \u00b7 controller epoch "
        f'<b id="controller-epoch">{_opt(view.controller_epoch)}</b> \u00b7 '
        f"{counts['partitions']} partitions, "
        f'<span id="urp-count" data-value="{counts["under-replicated"]}">'
        f"{counts['under-replicated']} under-replicated</span>, "
        f"{counts['offline']} offline, {counts['under-min-isr']} under min ISR</p>"
    )
    brokers = "".join(
        f'<tr data-broker="{b.id}" data-alive="{str(b.alive).lower()}"'
        f' data-answering="{"" if b.answering is None else str(b.answering).lower()}"'
        f"{' class=alarm' if not b.alive or b.answering is False else ''}>"
        f'<td class="num"><a href="/brokers/{b.id}">{b.id}</a></td><td>{_opt(b.address)}</td>'
        f"<td>{_broker_state(b)}</td>"
        f"<td>{'controller' if b.controller else ''}</td>"
        f"<td>{_metrics_link(b.metrics_url)}</td></tr>"
        for b in view.brokers
    )
    alerts = _alert_groups(view)
    return (
        summary
        + "<h2>Alerts</h2>"
        + alerts
        + charts(view.charts, view.taken_at)
        + "<h2>Brokers</h2>"
        + '<table id="brokers"><tr><th>id</th><th>address</th><th>state</th><th>role</th>'
        + f"<th>metrics</th></tr>{brokers}</table>"
        + _updated(view.taken_at)
    )


SUBJECTS_SHOWN = 8


def _alert_groups(view: ClusterView) -> str:
    if not view.alert_groups:
        return '<p id="alerts" class="ok">No alerts: every partition fully replicated.</p>'
    rows = []
    for g in view.alert_groups:
        shown = ", ".join(_alert_subject(x) for x in g.subjects[:SUBJECTS_SHOWN])
        more = len(g.subjects) - SUBJECTS_SHOWN
        if more > 0:
            shown += f" and {more} more"
        topic = f'<a href="{topic_href(g.topic)}">{_e(g.topic)}</a>' if g.topic else DASH
        brokers = (
            ", ".join(f'<a href="/brokers/{b}">{b}</a>' for b in g.brokers) if g.brokers else DASH
        )
        rows.append(
            f'<tr class="alarm alert-group" data-kind="{_e(g.kind)}" '
            f'data-topic="{_e(g.topic or "")}" data-brokers="{_ids(g.brokers)}" '
            f'data-count="{g.count}" data-subjects="{_e(" ".join(g.subjects))}">'
            f'<td><span class="badge {_alert_class(g.kind)}">{_e(g.kind)}</span></td>'
            f"<td>{topic}</td><td>{brokers}</td>"
            f'<td class="num count">{g.count}</td><td>{_e(g.detail)}'
            f'<br><span class="small">{shown}</span></td></tr>'
        )
    by_broker = "".join(
        f'<tr data-alert-broker="{b}"><td><a href="/brokers/{b}">broker {b}</a></td><td>'
        + ", ".join(f"{n} {_e(kind)}" for kind, n in kinds.items())
        + "</td></tr>"
        for b, kinds in view.alerts_by_broker.items()
    )
    broker_table = (
        '<table id="alerts-by-broker"><tr><th>broker</th><th>partitions it is named in</th></tr>'
        f"{by_broker}</table>"
        if by_broker
        else ""
    )
    return (
        f'<p class="small muted">{len(view.alerts)} alerts in {len(view.alert_groups)} '
        "groups (kind, topic, brokers)</p>"
        '<table id="alerts"><tr><th>alert</th><th>topic</th><th>brokers</th><th>count</th>'
        f"<th>detail and partitions</th></tr>{''.join(rows)}</table>" + broker_table
    )


def _broker_state(b: Broker) -> str:
    if not b.alive:
        return "<span class=bad>down</span>"
    if b.answering is False:
        return (
            f'<span class=bad title="{_e(b.not_answering_why or "")}">not answering</span> '
            '<span class="muted small">(still registered in ZooKeeper)</span>'
        )
    return "<span class=ok>up</span>"


def _alert_class(kind: str) -> str:
    return "warn" if kind in ("under-replicated", "source") else "bad"


def _alert_subject(subject: str) -> str:
    topic, dash, partition = subject.rpartition("-")
    if dash and topic and partition.isdigit():
        return f'<a href="{partition_href(topic, int(partition))}">{_e(subject)}</a>'
    return _e(subject)


def _metrics_link(url: str | None) -> str:
    return f'<a href="{_e(url)}">{_e(url)}</a>' if url else '<span class="muted">\u2014</span>'


# --- broker --------------------------------------------------------------------------


def _bytes(n: float | None) -> str:
    if n is None:
        return DASH
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return DASH


def _partition_links(names: list[str], limit: int = 40) -> str:
    if not names:
        return '<span class="muted">none</span>'
    shown = ", ".join(_alert_subject(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def broker_fragment(view: BrokerView) -> str:
    b = view.broker
    headline = (
        f'<p class="headline">broker <b>{b.id}</b> at {_opt(b.address)} · '
        f'<span id="broker-state" data-alive="{str(b.alive).lower()}" '
        f'data-answering="{"" if b.answering is None else str(b.answering).lower()}">'
        f"{_broker_state(b)}</span>"
        f"{' · controller' if b.controller else ''} · metrics "
        f"{_metrics_link(b.metrics_url)}</p>"
    )
    counts = (
        '<table id="broker-partitions"><tr><th></th><th>count</th><th>partitions</th></tr>'
        + "".join(
            f'<tr data-what="{key}" data-count="{len(names)}"><td>{label}</td>'
            f'<td class="num">{len(names)}</td><td class="small">{_partition_links(names)}</td>'
            "</tr>"
            for key, label, names in (
                ("leaders", "leader of", view.leaders),
                ("replicas", "replicas hosted", view.replicas),
                ("under-replicated", "of those, under-replicated", view.under_replicated),
                ("out-of-isr", "of those, this broker out of the ISR", view.out_of_isr),
            )
        )
        + "</table>"
    )
    if view.log_dirs:
        dirs = "".join(
            f'<tr class="log-dir" data-path="{_e(d.path)}" data-size="{d.size_bytes}" '
            f'data-usable="{"" if d.usable_bytes is None else d.usable_bytes}">'
            f"<td>{_e(d.path)}</td><td>{_e(d.error or 'ok')}</td>"
            f'<td class="num">{d.replicas}</td><td class="num">{_bytes(d.size_bytes)}</td>'
            f'<td class="num">{_bytes(d.usable_bytes)}</td>'
            f'<td class="num">{_bytes(d.total_bytes)}</td></tr>'
            for d in view.log_dirs
        )
        disks = (
            '<table id="log-dirs"><tr><th>log dir</th><th>state</th><th>replicas</th>'
            "<th>replica bytes</th><th>free on volume</th><th>volume size</th></tr>"
            f"{dirs}</table>"
        )
    else:
        disks = f'<p id="log-dirs">{_unknown(view.log_dirs_unknown or "no log dirs")}</p>'
    if view.rates:
        rate_rows = "".join(
            f'<tr class="rate" data-name="{_e(name)}" data-value="{value:.3f}">'
            f'<td>{_e(name)}</td><td class="num">{value:,.1f}</td></tr>'
            for name, value in view.rates.items()
        )
        rates = (
            f"<p>{_age(view.rates_at, view.taken_at)}</p>"
            f'<table id="rates"><tr><th>counter</th><th>per second</th></tr>{rate_rows}</table>'
        )
    else:
        rates = f'<p id="rates">{_unknown(view.rates_unknown or "no rates")}</p>'
    return (
        _errors(view.errors)
        + headline
        + "<h2>Partitions</h2>"
        + counts
        + "<h2>Disk per log dir (DescribeLogDirs)</h2>"
        + disks
        + "<h2>Request rates (its metrics endpoint)</h2>"
        + rates
        + _updated(view.taken_at)
    )


# --- topics --------------------------------------------------------------------------


def topics_fragment(rows: list[TopicRow]) -> str:
    if not rows:
        return '<p class="muted">No topics.</p>'
    body = "".join(
        f'<tr data-topic="{_e(t.name)}"{" class=alarm" if t.under_replicated else ""}>'
        f'<td><a href="{topic_href(t.name)}">{_e(t.name)}</a>'
        f"{' <span class=badge>internal</span>' if t.internal else ''}</td>"
        f'<td class="num">{t.partitions}</td><td class="num">{t.replication_factor}</td>'
        f'<td class="num urp">{t.under_replicated}</td><td class="num">{t.offline}</td>'
        f'<td class="num">{t.under_min_isr}</td></tr>'
        for t in rows
    )
    return (
        '<table id="topics"><tr><th>topic</th><th>partitions</th><th>RF</th>'
        "<th>under-replicated</th><th>offline</th><th>under min ISR</th></tr>"
        f"{body}</table>"
    )


def topic_fragment(partitions: list[Partition]) -> str:
    body = "".join(
        f"<tr{' class=alarm' if p.under_replicated or p.offline else ''}>"
        f'<td><a href="{partition_href(p.topic, p.partition)}">{p.partition}</a></td>'
        f"<td>{p.leader if p.leader >= 0 else '<span class=bad>none</span>'}</td>"
        f"<td>{_opt(p.leader_epoch)}</td><td>{_ids(p.replicas)}</td><td>{_ids(p.isr)}</td>"
        f"<td>{_status(p)}</td></tr>"
        for p in partitions
    )
    return (
        '<table id="partitions"><tr><th>partition</th><th>leader</th><th>leader epoch</th>'
        f"<th>replicas</th><th>ISR</th><th>status</th></tr>{body}</table>"
    )


def _status(p: Partition) -> str:
    tags = []
    if p.problems:
        titles = "; ".join(p.problems)
        label = (
            "leader not answering"
            if any(x.startswith("leader not answering") for x in p.problems)
            else (
                "HW stuck"
                if all(x.startswith("HW stuck") for x in p.problems)
                else "ISR member not answering"
            )
        )
        tags.append(f'<span class="badge bad problem" title="{_e(titles)}">{_e(label)}</span>')
    if p.offline:
        tags.append('<span class="badge bad">offline</span>')
    if p.under_replicated:
        tags.append('<span class="badge warn">under-replicated</span>')
    if p.under_min_isr:
        tags.append('<span class="badge bad">under min ISR</span>')
    return "".join(tags) or '<span class="badge ok">in sync</span>'


# --- partition -----------------------------------------------------------------------


def _pct(value: int, scale: int) -> str:
    return f"{100.0 * value / scale:.3f}%"


def partition_fragment(view: PartitionView) -> str:
    p = view.partition
    hw = view.high_watermark
    now = view.taken_at
    known = [r.log_end_offset for r in view.replicas if r.log_end_offset is not None]
    known += [r.high_watermark for r in view.replicas if r.high_watermark is not None]
    # Headroom past the longest log, so a leader ahead of the HW is not drawn at the edge.
    scale = max(int(max([*known, hw or 0, 1]) * 1.08), 1)
    why = view.watermarks_unknown or "the leader did not answer"
    hw_text = _opt(hw) if hw is not None else _unknown(why)
    start_text = (
        _opt(view.log_start_offset)
        if view.log_start_offset is not None
        else _unknown("as the HW" if hw is None else why)
    )
    problems = "".join(f'<li class="problem">{_e(x)}</li>' for x in p.problems)
    headline = (
        f'<p class="headline">HW <b id="hw" data-value="{"" if hw is None else hw}">'
        f"{hw_text}</b> {_age(view.watermarks_at, now)} · log start {start_text} · "
        f'leader <b id="leader" data-value="{p.leader}">'
        f"{p.leader if p.leader >= 0 else 'none'}</b> · leader epoch {_opt(p.leader_epoch)}"
        f' · ISR <span id="isr" data-value="{_ids(p.isr)}">{_ids(p.isr)}</span>'
        f" (ZooKeeper) of replicas {_ids(p.replicas)} · min ISR {p.min_isr} "
        f'<span id="status">{_status(p)}</span></p>'
        + (f'<ul class="errors" id="problems">{problems}</ul>' if problems else "")
    )
    rows = []
    for r in view.replicas:
        state = "down" if not r.alive or r.answering is False else ("isr" if r.in_isr else "out")
        tags = []
        if r.leader:
            tags.append('<span class="badge">leader</span>')
        if r.in_isr and r.problems:
            tags.append('<span class="badge bad">ISR (ZooKeeper), not answering</span>')
        elif r.in_isr:
            tags.append('<span class="badge ok">ISR</span>')
        else:
            tags.append('<span class="badge warn">not in ISR</span>')
        if not r.alive:
            tags.append('<span class="badge bad">down</span>')
        elif r.answering is False:
            tags.append('<span class="badge bad">not answering</span>')
        stale = "" if r.fresh else " stale"
        bar = ""
        if r.log_end_offset is not None:
            start = r.log_start_offset or 0
            bar = (
                f'<div class="log{stale}" style="left:{_pct(start, scale)};'
                f'width:{_pct(max(r.log_end_offset - start, 0), scale)}"></div>'
            )
        own = ""
        if r.high_watermark is not None:
            own = (
                f'<div class="mark own" style="left:{_pct(r.high_watermark, scale)}" '
                f'title="HW as broker {r.broker} knows it: {r.high_watermark}"></div>'
            )
        cluster_hw = (
            f'<div class="mark hw" style="left:{_pct(hw, scale)}" title="HW {hw}"></div>'
            if hw is not None
            else ""
        )
        if r.log_end_offset is not None:
            behind = ""
            if not r.leader:
                behind = (
                    f' · <span class="behind" data-value="{r.behind}">{r.behind} behind '
                    "the leader</span>"
                    if r.behind is not None
                    else f" · behind the leader: {_unknown(r.behind_unknown or '?')}"
                )
            own_hw = _opt(r.high_watermark) if r.high_watermark is not None else "unknown"
            nums = (
                f'LEO <b class="leo">{r.log_end_offset}</b> · HW '
                f'<span class="own-hw">{own_hw}</span>{behind}'
                f"<br>{_age(r.gathered_at, now)}"
            )
            if not r.fresh:
                nums += ' <span class="badge warn">old</span>'
            if r.error:
                nums += f'<br><span class="muted small">{_e(r.error)}</span>'
        else:
            nums = _unknown(r.error or "no data")
        rows.append(
            f'<div class="replica {state}" data-broker="{r.broker}" '
            f'data-leo="{"" if r.log_end_offset is None else r.log_end_offset}" '
            f'data-hw="{"" if r.high_watermark is None else r.high_watermark}" '
            f'data-isr="{str(r.in_isr).lower()}" '
            f'data-answering="{"" if r.answering is None else str(r.answering).lower()}" '
            f'data-fresh="{str(r.fresh).lower()}" data-problems="{_e("; ".join(r.problems))}">'
            f"<div>broker {r.broker} {''.join(tags)}</div>"
            f'<div class="track">{bar}{cluster_hw}{own}</div><div>{nums}</div></div>'
        )
    legend = (
        '<p class="legend small">'
        '<span><i class="swatch" style="background:#2e7d32"></i>log, replica in ISR</span>'
        '<span><i class="swatch" style="background:#d08a16"></i>log, out of ISR</span>'
        '<span><i class="swatch" style="background:#c4c9cf"></i>broker down or not '
        "answering</span>"
        '<span><i class="swatch" style="border-left:3px solid #1565c0"></i>'
        "HW (leader, over the protocol)</span>"
        '<span><i class="swatch" style="border-left:2px dashed #0d1b2a"></i>'
        "HW as the replica knows it</span> bars run from log start to LEO; hatched: "
        "the last numbers read, not current</p>"
    )
    timeline = (
        f'<p><a href="/timeline?{urlencode({"topic": p.topic, "partition": p.partition})}">'
        "state changes of this partition →</a> · "
        f'<a href="{partition_href(p.topic, p.partition)}/messages">messages →</a></p>'
    )
    return (
        _errors(view.errors)
        + headline
        + f'<div class="replicas" id="replicas">{"".join(rows)}</div>'
        + legend
        + charts(view.charts, view.taken_at)
        + timeline
        + _updated(view.taken_at)
    )


# --- configs and ACLs ------------------------------------------------------------------


def topic_links(topic: str) -> str:
    href = topic_href(topic)
    return (
        f'<p class="small"><a href="{href}/configs">configs and ACLs →</a> · '
        f'<a href="/timeline?{urlencode({"topic": topic})}">state changes →</a></p>'
    )


def topic_configs_fragment(view: TopicConfigsView) -> str:
    rows = "".join(
        f'<tr class="config" data-name="{_e(c.name)}" data-source="{_e(c.source)}">'
        f"<td>{_e(c.name)}</td><td>"
        + (
            '<span class="muted">(sensitive, not shown)</span>'
            if c.sensitive
            else (_e(c.value) if c.value is not None else '<span class="muted">null</span>')
        )
        + f"</td><td>{'<b>' + _e(c.source) + '</b>' if c.source == 'topic' else _e(c.source)}"
        f"</td><td>{'read-only' if c.read_only else ''}</td></tr>"
        for c in view.configs
    )
    overridden = sum(c.source == "topic" for c in view.configs)
    configs = (
        f'<p class="small muted">{len(view.configs)} configs, {overridden} set on the topic '
        "(bold); read-only here: change them with <code>strandline configs --alter</code></p>"
        '<table id="configs"><tr><th>config</th><th>value</th><th>from</th><th></th></tr>'
        f"{rows}</table>"
        if view.configs
        else ""
    )
    return (
        _errors(view.errors)
        + "<h2>Configs</h2>"
        + configs
        + "<h2>ACLs that apply to this topic</h2>"
        + acls_fragment(view.acls)
    )


def acls_fragment(view: AclsView) -> str:
    if view.unavailable is not None:
        body = f'<p id="acls" class="muted" data-unavailable="1">{_e(view.unavailable)}</p>'
    elif not view.acls:
        body = '<p id="acls" class="muted">No ACLs.</p>'
    else:
        rows = "".join(
            f'<tr class="acl" data-principal="{_e(a.principal)}" '
            f'data-resource="{_e(a.resource_type)}:{_e(a.resource_name)}">'
            f"<td>{_e(a.resource_type)}</td><td>{_e(a.resource_name)}</td>"
            f"<td>{_e(a.pattern_type)}</td><td>{_e(a.principal)}</td><td>{_e(a.host)}</td>"
            f"<td>{_e(a.operation)}</td>"
            f'<td class="{"bad" if a.permission == "DENY" else "ok"}">{_e(a.permission)}</td></tr>'
            for a in view.acls
        )
        body = (
            '<table id="acls"><tr><th>resource</th><th>name</th><th>pattern</th>'
            "<th>principal</th><th>host</th><th>operation</th><th>permission</th></tr>"
            f"{rows}</table>"
        )
    return body + _updated(view.taken_at)


# --- messages ------------------------------------------------------------------------


def messages_form(topic: str, partition: int, q: MessageQuery, raw: dict[str, str]) -> str:
    def box(name: str, size: int, hint: str) -> str:
        return (
            f'{name} <input name="{name}" value="{_e(raw.get(name, ""))}" size="{size}" '
            f'placeholder="{_e(hint)}"> '
        )

    committed = " checked" if q.isolation == "read_committed" else ""
    return (
        f'<form class="filter" id="browse" method="get" '
        f'action="{partition_href(topic, partition)}/messages">'
        + box("offset", 10, "last ones")
        + box("timestamp", 22, "ms or 2026-01-31T12:00:00")
        + box("limit", 4, str(q.limit))
        + f'<label><input type="checkbox" name="isolation" value="read_committed"{committed}>'
        " read_committed</label> <button>read</button> "
        f'<a href="{partition_href(topic, partition)}">partition →</a></form>'
    )


def _shown(x: Shown, what: str) -> str:
    if x.text is None:
        return '<span class="muted">null</span>'
    extra = []
    if x.binary:
        extra.append(f"binary, {x.size} bytes, hex")
    if x.cut:
        extra.append(f"first {len(x.text)} of {x.size} shown")
    note = f' <span class="muted small">({_e(", ".join(extra))})</span>' if extra else ""
    return f'<code class="{what}">{_e(x.text)}</code>{note}'


def messages_fragment(view: MessagesView) -> str:
    q = view.query
    head = (
        f'<p class="headline">{_e(view.query.isolation)} · log start {_opt(view.low)} '
        f"· {'last stable offset' if q.isolation == 'read_committed' else 'HW'} "
        f'<b id="end" data-value="{"" if view.high is None else view.high}">{_opt(view.high)}</b>'
        f" · reading from {_opt(view.start)}</p>"
    )
    rows = "".join(
        f'<tr class="message" data-offset="{m.offset}">'
        f'<td class="num">{m.offset}</td>'
        f'<td class="small">{_e(_iso_ms(m.timestamp))}<br>'
        f'<span class="muted">{_e(m.timestamp_type)}</span></td>'
        f"<td>{_shown(m.key, 'key')}</td><td>{_shown(m.value, 'value')}</td><td>"
        + "<br>".join(f"<b>{_e(k)}</b>: {_shown(v, 'header')}" for k, v in m.headers)
        + "</td></tr>"
        for m in view.messages
    )
    table = (
        '<table id="messages"><tr><th>offset</th><th>timestamp (UTC)</th><th>key</th>'
        f"<th>value</th><th>headers</th></tr>{rows}</table>"
        if rows
        else '<p class="muted" id="messages">No records here.</p>'
    )
    more = ""
    if view.next_offset is not None and view.high is not None and view.next_offset < view.high:
        query = urlencode({"offset": view.next_offset, "isolation": q.isolation, "limit": q.limit})
        more = (
            f'<p><a id="next" href="{partition_href(view.topic, view.partition)}/messages?'
            f'{query}">next {q.limit} from {view.next_offset} →</a></p>'
        )
    return _errors(view.errors) + head + table + more + _updated(view.taken_at)


def _iso_ms(ms: int) -> str:
    if ms < 0:
        return "no timestamp"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(
        timespec="milliseconds"
    )


# --- groups --------------------------------------------------------------------------


def groups_fragment(view: GroupsView) -> str:
    if not view.groups:
        return _errors(view.errors) + '<p class="muted">No consumer groups.</p>'
    parts = [_errors(view.errors)]
    for g in view.groups:
        head = (
            f'<h2 data-group="{_e(g.group_id)}">{_e(g.group_id)} '
            f'<span class="badge">{_e(g.state)}</span> '
            f'<span class="small muted">coordinator {_opt(g.coordinator)} \u00b7 assignor '
            f"{_e(g.assignor or DASH)} \u00b7 total lag "
            f'<span class="total-lag">{_opt(g.total_lag)}</span></span></h2>'
        )
        if g.error:
            parts.append(head + error_fragment(g.error))
            continue
        members = "".join(
            f"<tr><td>{_e(m.member_id)}</td><td>{_e(m.client_id)}</td><td>{_e(m.host)}</td>"
            f"<td>{_e(', '.join(m.assignment)) or DASH}</td></tr>"
            for m in g.members
        )
        members_table = (
            "<table class=members><tr><th>member</th><th>client id</th><th>host</th>"
            f"<th>assigned</th></tr>{members}</table>"
            if g.members
            else '<p class="muted small">no active members</p>'
        )
        offsets = "".join(
            f'<tr data-tp="{_e(o.topic)}-{o.partition}">'
            f'<td><a href="{partition_href(o.topic, o.partition)}">'
            f"{_e(o.topic)}-{o.partition}</a></td>"
            f'<td class="num">{_opt(o.committed)}</td><td class="num">{_opt(o.end)}</td>'
            f'<td class="num lag">{_opt(o.lag)}</td><td class="small">{_opt(o.owner)}</td></tr>'
            for o in g.offsets
        )
        offsets_table = (
            "<table class=offsets><tr><th>partition</th><th>committed</th><th>HW</th>"
            f"<th>lag</th><th>owner</th></tr>{offsets}</table>"
            if g.offsets
            else ""
        )
        parts.append(head + members_table + offsets_table)
    parts.append(_updated(view.taken_at))
    return "".join(parts)


# --- reassignments -------------------------------------------------------------------


def reassignments_fragment(view: ReassignmentsView) -> str:
    if not view.available:
        return (
            '<p class="muted">Reassignments live in ZooKeeper (/admin/reassign_partitions): '
            "start the console with --zookeeper or --data-dir to see them.</p>"
        )
    if not view.reassignments:
        return (
            _errors(view.errors)
            + '<p id="no-reassignments">No reassignment in progress.</p>'
            + _updated(view.taken_at)
        )
    body = "".join(
        f'<tr data-tp="{_e(r.topic)}-{r.partition}">'
        f'<td><a href="{partition_href(r.topic, r.partition)}">{_e(r.topic)}-{r.partition}</a>'
        f"</td><td>{_ids(r.current)}</td><td>{_ids(r.target)}</td><td>{_ids(r.isr)}</td>"
        f"<td>{_ids(r.adding)}</td><td>{_ids(r.removing)}</td>"
        f"<td>{_reassign_progress(r.target, r.isr)}</td></tr>"
        for r in view.reassignments
    )
    return (
        _errors(view.errors)
        + '<table id="reassignments"><tr><th>partition</th><th>replicas now</th>'
        + "<th>target</th><th>ISR</th><th>adding</th><th>removing</th><th>progress</th></tr>"
        + body
        + "</table>"
        + _updated(view.taken_at)
    )


def _reassign_progress(target: list[int], isr: list[int]) -> str:
    caught_up = sum(1 for b in target if b in isr)
    return f"{caught_up}/{len(target)} target replicas in ISR"


# --- timeline ------------------------------------------------------------------------


def timeline_form(f: TimelineFilter) -> str:
    def box(name: str, value: object | None, size: int, numeric: bool = False) -> str:
        mode = ' inputmode="numeric"' if numeric else ""
        text = "" if value is None else value
        return f'{name} <input name="{name}" value="{_e(text)}" size="{size}"{mode}> '

    checked = " checked" if f.internal else ""
    return (
        '<form class="filter" method="get" action="/timeline">'
        + box("topic", f.topic, 24)
        + box("partition", f.partition, 4, True)
        + box("broker", f.broker, 4, True)
        + box("event", f.event, 18)
        + f'<label><input type="checkbox" name="internal" value="1"{checked}> '
        "internal topics</label> <button>filter</button> "
        '<a href="/timeline">all</a></form>'
    )


def timeline_fragment(view: TimelineView) -> str:
    f = view.filter
    rows = "".join(
        f'<tr class="{"alarm" if _alarming(x) else ""}" data-event="{_e(x.get("event", "?"))}"'
        f' data-broker="{_e(x.get("broker", "?"))}" data-topic="{_e(x.get("topic") or "")}">'
        f'<td class="small">{_e(x.get("ts", ""))}</td><td class="num">'
        f"{_e(x.get('broker', '?'))}</td>"
        f"<td>{_e(x.get('event', '?'))}</td><td>{_e(scl.where(x))}</td>"
        f'<td class="small">{_e(scl.details(x))}</td></tr>'
        for x in reversed(view.entries)
    )
    shown = len(view.entries)
    note = f"{view.total} entries from {len(view.logs)} broker log(s), newest first" + (
        f", the last {shown} shown" if shown < view.total else ""
    )
    hidden = ""
    if view.hidden_internal:
        hidden = (
            f' · <a id="hidden-internal" data-value="{view.hidden_internal}" '
            f'href="/timeline?{urlencode(f.query(internal=True))}">'
            f"{view.hidden_internal} of internal topics hidden</a>"
        )
    kinds = " · ".join(
        f'<a class="kind{" on" if kind == f.event else ""}" data-kind="{_e(kind)}" '
        f'href="/timeline?{urlencode(f.query(event=None if kind == f.event else kind))}">'
        f"{_e(kind)} ({n})</a>"
        for kind, n in view.kinds.items()
    )
    table = (
        '<table id="timeline"><tr><th>time (UTC)</th><th>broker</th><th>event</th>'
        f"<th>partition</th><th>details</th></tr>{rows}</table>"
        if rows
        else '<p class="muted">No matching state changes.</p>'
    )
    return (
        _errors(view.errors)
        + f'<p class="muted small">{_e(note)}{hidden}</p>'
        + (f'<p class="small" id="kinds">events: {kinds}</p>' if kinds else "")
        + table
    )


def _alarming(fields: dict[str, object]) -> bool:
    event = str(fields.get("event", ""))
    # The same words the CLI's merge table paints red.
    return any(word in event for word in scl.ALARMING)
