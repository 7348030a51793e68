"""The evaluation report's figures and its one-file HTML page.

`report_figures` draws plotly bars (A and B with their 95% intervals, per domain and per
family) and, for a comparison, the deltas worst first; `report_html` puts the tables
(`backend.eval_tables`), the held-out answers and the figures into one self-contained page
(plotly.js inlined once, no external links), and `write_html` writes it atomically.

    write_html(store, [base_id, ckpt_id], "out.html")   # returns build_report's dict

Not covered: computing the report (`backend.eval_report.build_report`).
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import plotly.graph_objects as go

from core.errors import ConfigError
from trainer.eval_stats import DEFAULT_RESAMPLES
from backend.eval_report import build_report
from backend.eval_tables import (BASELINE_NOTE, baselines_table, capability_rows, delta_rows, domain_rows,
                                 family_rows, headline_rows, report_title, side_rows, side_tags, summary_sentence,
                                 transfer_rows)


VERDICT_COLORS = {"regression": "#d62728", "improvement": "#2ca02c", "no clear change": "#9e9e9e",
                  "too few tasks": "#bdbdbd"}


SIDE_COLORS = ("#7f7f7f", "#1f77b4")  # A (baseline) grey, B blue


MARGIN = {"l": 10, "r": 10, "t": 50, "b": 10}  # plotly figure margins (px)


def _bars(report: dict, table: str, metric: str, title: str) -> go.Figure:
    names = sorted({g for s in report["summaries"] for g in s[table]})
    fig = go.Figure()
    for i, (tag, side, summary) in enumerate(zip(side_tags(report), report["sides"], report["summaries"])):
        ests = [summary[table].get(n, {}).get(metric) for n in names]
        fig.add_trace(go.Bar(
            x=names, y=[e["value"] if e else None for e in ests], name=f"{tag}: {side['label']}" if tag else side["label"],
            marker_color=SIDE_COLORS[i if len(report["sides"]) == 2 else 1],
            error_y={"type": "data", "symmetric": False, "array": [e["high"] - e["value"] if e else 0 for e in ests],
                     "arrayminus": [e["value"] - e["low"] if e else 0 for e in ests]}))
    fig.update_layout(title=title, barmode="group", height=380, yaxis={"range": [0, 1.05], "tickformat": ".0%"},
                      margin=MARGIN, legend={"orientation": "h", "y": -0.2})
    return fig


def _delta_figure(report: dict) -> go.Figure:
    ranked = report["comparison"]["ranked"]
    fig = go.Figure(go.Bar(
        y=[f"{r['domain']} · {r['metric'].replace('_', ' ')}" for r in ranked], x=[r["delta"] for r in ranked],
        orientation="h", marker_color=[VERDICT_COLORS[r["verdict"]] for r in ranked],
        customdata=[r["verdict"] for r in ranked], hovertemplate="%{y}: %{x:+.3f} (%{customdata})<extra></extra>",
        error_x={"type": "data", "symmetric": False, "array": [r["high"] - r["delta"] for r in ranked],
                 "arrayminus": [r["delta"] - r["low"] for r in ranked]}))
    fig.update_layout(title="Change B − A per domain and metric, worst first (red: regression, green: improvement)",
                      height=max(300, 24 * len(ranked) + 100), yaxis={"autorange": "reversed"},
                      xaxis={"zeroline": True, "zerolinewidth": 2}, margin=MARGIN)
    return fig


def report_figures(report: dict) -> list[tuple[str, go.Figure]]:
    """(title, figure) pairs: grouped bars (A and B, error bars = 95% bootstrap CI) per
    domain and per family for pass@1 and pass@k, and with two evaluations a horizontal
    bar chart of the deltas, worst first, regressions red and improvements green."""
    if not report["sides"]:
        return []
    metrics = ["pass@1"] + ([f"pass@{report['k']}"] if report["k"] else [])
    out = [(f"{m} per {what}", _bars(report, table, m, f"{m} per {what} (95% CI)"))
           for table, what in (("domains", "domain"), ("families", "family")) for m in metrics]
    if report["comparison"] and report["comparison"]["ranked"]:
        out.append(("Deltas, worst first", _delta_figure(report)))
    return out


_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; }
tr.regression td { background: #f8d0d0; }
tr.improvement td { background: #d4f0d4; }
p.warning { background: #fff3cd; padding: 0.5em; border-left: 4px solid #e0a800; }
.meta { color: #666; font-size: 0.9em; }
</style></head><body>
{% macro table(rows) %}{% if rows %}<table><thead><tr>{% for c in rows[0] %}<th>{{ c }}</th>{% endfor %}</tr></thead>
<tbody>{% for r in rows %}<tr{% if r.get("verdict") in ("regression", "improvement") %} class="{{ r["verdict"] }}"{% endif %}>
{% for c in rows[0] %}<td>{{ r[c] }}</td>{% endfor %}</tr>
{% endfor %}</tbody></table>{% endif %}{% endmacro %}
<h1>{{ title }}</h1>
<p class="meta">Written {{ written }} by RL Workbench. Intervals: 95% percentile bootstrap over tasks
({{ resamples }} resamples){% if compared %}; deltas B − A are paired over the tasks both evaluations share{% endif %}.</p>
{% for w in warnings %}<p class="warning">{{ w }}</p>{% endfor %}
{% if not sides %}<p>No evaluations in this report.</p>{% else %}
<h2>Evaluations</h2>{{ table(sides) }}
<h2>Headline</h2><p><strong>{{ summary }}</strong></p>{{ table(headline) }}
<p class="meta">{{ baseline_note }}</p>
{% if baselines %}<h2>Baselines</h2>
<p class="meta">Per domain, on the held-out tasks played: the constant answer and the rule copying from the
question that score best with the domain's verifier, the format-only reward (the reward floor: right format,
wrong answer), and each model's most common answer and share of answers copied from the question.</p>
{{ table(baselines) }}{% endif %}
{% if deltas %}<h2>Changes, worst first</h2>{{ table(deltas) }}{% endif %}
<h2>Per family</h2>{{ table(families) }}
{% if transfer %}<h2>Transfer: trained domains and domains the run never saw</h2>
<p>pass@1, B - A over the shared tasks; a domain improved (regressed) when its own delta's 95% interval is above (below) 0.</p>
{{ table(transfer) }}{% endif %}
{% for name, rows in per_domain %}<h2>Per domain: {{ name }}</h2>{{ table(rows) }}{% endfor %}
{% if capabilities %}<h2>Tool use, multi-turn and context length</h2>{{ table(capabilities) }}{% endif %}
{% if answers %}<h2>Held-out answers</h2>
<p class="meta">What the model answered, a few tasks per domain (answers that changed from A to B first, then
wrong ones): the answer extracted from the completion by the verifier's own rule, against the reference. All of
them: the Evaluation page's "Held-out answers" panel, or <code>rlwb eval samples</code>.</p>
{% for name, rows in answers %}<h3>{{ name }}</h3>{{ table(rows) }}{% endfor %}{% endif %}
<h2>Figures</h2>{% for div in figures %}<div class="figure">{{ div }}</div>{% endfor %}
{% endif %}
</body></html>
"""


def report_html(report: dict, answers: list[tuple[str, list[dict]]] | None = None) -> str:
    """The report as one self-contained HTML page: tables (regressions on a red background,
    improvements green), the held-out `answers` when given (domain -> rows,
    `backend.heldout.answer_examples`) and interactive figures, with plotly.js inlined once
    (no CDN, no external links; about 5 MB). Works for 0, 1 and 2 evaluations."""
    import jinja2
    from markupsafe import Markup

    figures = [Markup(fig.to_html(full_html=False, include_plotlyjs=i == 0, config={"displaylogo": False},
                                  default_height=f"{fig.layout.height or 380}px"))
               for i, (_, fig) in enumerate(report_figures(report))]
    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    tags = side_tags(report)
    return env.from_string(_TEMPLATE).render(
        title=report_title(report), written=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        resamples=report["resamples"] if report["sides"] else 0, compared=report["comparison"] is not None,
        warnings=report["warnings"], sides=side_rows(report), headline=headline_rows(report),
        summary=summary_sentence(report),
        deltas=delta_rows(report), families=family_rows(report), transfer=transfer_rows(report),
        baselines=baselines_table(report),
        baseline_note=BASELINE_NOTE, capabilities=capability_rows(report),
        per_domain=[(f"{t} {s['label']}".strip(), domain_rows(report, i))
                    for i, (t, s) in enumerate(zip(tags, report["sides"]))],
        answers=answers or [], figures=figures)


def write_html(store, eval_ids: list[str], path: str | Path, resamples: int = DEFAULT_RESAMPLES,
               overwrite: bool = False, answers: Callable[[Any, dict], list] | None = None) -> dict:
    """Build the report of `eval_ids` (see `build_report`) and write it to `path` as one
    self-contained HTML file, atomically (a temporary file in the same directory, then
    `os.replace`). A symlink is followed (its target is written). Returns the report.
    `answers(store, report)` gives its held-out answers section (`report_html`).

    Raises:
        ConfigError: an empty path; a directory that does not exist; `path` is a directory,
            a device, FIFO or socket, or the store's own database; an existing file without
            `overwrite`.
        EvalNotFound, ConfigError: from `build_report`.
    """
    if not str(path).strip():
        raise ConfigError("--html needs a file name, e.g. --html report.html")
    path = Path(path).resolve()  # write a symlink's target, not over the link
    if not path.parent.is_dir():
        raise ConfigError(f"can't write {path}: the directory {path.parent} does not exist; create it or "
                          "pick another --html path")
    if path.is_dir():
        raise ConfigError(f"can't write {path}: it is a directory; give a file name such as {path / 'report.html'}")
    if path.exists():
        if not path.is_file():
            raise ConfigError(f"can't write {path}: it is not a regular file (a device, FIFO or socket); "
                              "pick another --html path")
        store_file = Path(getattr(store, "path", "")) if getattr(store, "path", ":memory:") != ":memory:" else None
        if store_file is not None and store_file.exists() and os.path.samefile(path, store_file):
            raise ConfigError(f"can't write {path}: it is the store's database; pick another --html path")
        if not overwrite:
            raise ConfigError(f"{path} exists; pass --force to replace it, or pick another --html path")
    report = build_report(store, eval_ids, resamples)
    html = report_html(report, answers(store, report) if answers else None)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise ConfigError(f"can't write {path}: {e.strerror}; pick another --html path") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(html)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a report is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return report
