"""Plotly figures of metric curves, shared by the Runs page and bench/ui_load.py.

`line_chart` draws long-form metric rows (step, value, one column naming the line) with
`go.Scatter` traces; `facet_chart` draws small multiples. Not covered: styling themes.
"""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go


def line_chart(frame: pd.DataFrame, title: str, color: str = "name", height: int = 320) -> go.Figure:
    """Line chart of long-form metric rows (step, value, `color`), one line per `color` value.

    Built from `go.Scatter` traces (several times faster than `px.line` per figure, which
    matters with a dozen panels on a live page)."""
    markers = frame["step"].nunique() < 30
    fig = go.Figure()
    for name, rows in frame.groupby(color, sort=True):
        fig.add_trace(go.Scatter(x=rows["step"], y=rows["value"], name=str(name),
                                 mode="lines+markers" if markers else "lines"))
    fig.update_layout(title=title, height=height, margin=dict(l=10, r=10, t=40, b=10), legend_title_text="",
                      xaxis_title="step", yaxis_title="value")
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
