"""Plotly figures of metric curves, shared by the Runs page and bench/ui_load.py.

`line_chart` draws long-form metric rows (step, value, one column naming the line) with
`go.Scatter` traces; `facet_chart` draws small multiples. Not covered: styling themes.
"""

from __future__ import annotations

import math
from typing import Callable

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go


def line_chart(frame: pd.DataFrame, title: str, color: str = "name", height: int = 320,
               label: Callable[[str], str] = str, y_title: str = "") -> go.Figure:
    """Line chart of long-form metric rows (step, value, `color`), one line per `color` value.

    Steps are whole numbers on the x axis (no 1.5); `label` turns a line's name into its
    legend entry (`backend.views.metric_label` on the Runs page); `y_title` names the y axis
    (empty: the title says what it is). A metric that never moves from 0 is drawn on 0..1,
    not on plotly's -1..1. Built from `go.Scatter` traces (several times faster than
    `px.line` per figure, which matters with a dozen panels on a live page)."""
    steps = frame["step"].nunique()
    markers = steps < 30
    fig = go.Figure()
    for name, rows in frame.groupby(color, sort=False):
        fig.add_trace(go.Scatter(x=rows["step"], y=rows["value"], name=label(str(name)),
                                 mode="lines+markers" if markers else "lines"))
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=40, b=10), legend_title_text="",
                      xaxis_title="step", yaxis_title=y_title)
    span = (frame["step"].max() - frame["step"].min()) if len(frame) else 0
    fig.update_xaxes(tickformat="d", dtick=max(1, math.ceil(span / 10)) if span else 1)
    values = frame["value"].dropna() if len(frame) else frame.get("value", pd.Series(dtype=float))
    if len(values) and values.min() == values.max() == 0:
        fig.update_yaxes(range=[0, 1])
    elif len(values) and values.min() >= 0:
        fig.update_yaxes(rangemode="tozero")
    return fig


def facet_chart(frame: pd.DataFrame, rows: int):
    """Small multiples, one per metric name (the "Other metrics" expander)."""
    # plotly caps row spacing at 1/(rows-1); keep ~40 px between rows at any count
    fig = px.line(frame, x="step", y="value", color="name", facet_col="name", facet_col_wrap=2,
                  height=260 * rows, facet_row_spacing=40 / (260 * rows), markers=frame["step"].nunique() < 30)
    fig.update_yaxes(matches=None, showticklabels=True)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
    fig.update_layout(showlegend=False, margin=dict(l=10, r=10, t=40, b=10))
    return fig
