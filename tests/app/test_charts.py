"""The metric charts read as a person expects: whole steps, legends in words, a metric stuck
at 0 drawn on 0..1, the panel's own y-axis title."""

import pandas as pd

from app.charts import line_chart
from backend import views


def _frame(values: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"step": i + 1, "name": name, "value": v} for name, vs in values.items()
                         for i, v in enumerate(vs)])


def test_steps_are_whole_numbers_and_legends_are_words():
    fig = line_chart(_frame({"reward/mean": [0.1, 0.3, 0.2], "accuracy/mean": [0.0, 0.1, 0.2]}),
                     "Reward and pass rate (mean)", label=views.metric_label)
    assert fig.layout.xaxis.tickformat == "d" and fig.layout.xaxis.dtick == 1
    assert [t.name for t in fig.data] == ["reward", "pass rate"]  # in the panel's order, not alphabetical
    assert fig.layout.yaxis.title.text in (None, "")  # no "value" on every axis
    long = line_chart(_frame({"kl": [0.01 * i for i in range(95)]}), "KL to reference")
    assert long.layout.xaxis.dtick == 10


def test_a_metric_stuck_at_zero_is_drawn_on_zero_to_one():
    fig = line_chart(_frame({"clip_frac": [0.0, 0.0, 0.0]}), "Clip fraction (share of tokens)")
    assert tuple(fig.layout.yaxis.range) == (0, 1)
    fig = line_chart(_frame({"kl": [-0.2, 0.1]}), "KL to reference")
    assert fig.layout.yaxis.range is None and fig.layout.yaxis.rangemode is None  # negative values keep their room


def test_metric_labels():
    assert views.metric_label("time/learn") == "learner update"
    assert views.metric_label("tools/errors/timeout") == "timeout"
    assert views.metric_label("tools/call_validity/mean") == "all domains (mean)"
    assert views.metric_label("turns/terminal_count_matches") == "terminal_count_matches"
