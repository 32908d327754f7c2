"""pages/ui/charts.py: the one plotly layout — the legend under the plot, long entries
shortened (full name kept for the hover), the figure grown by the legend's rows so the plot
keeps its height however many series it has."""

from __future__ import annotations

import plotly.graph_objects as go

from pages.ui.charts import (
    CHART_WIDTH_PX,
    LEGEND_MAX_CHARS,
    LEGEND_ROW_PX,
    MARGIN_PX,
    PLOT_HEIGHT_PX,
    X_AXIS_PX,
    legend_rows,
    short_label,
    short_labels,
    style,
)

RUN = "#12 digits_classifier (dynamic batching on) 2026-12-04 12:40 UTC"


def figure(names: list[str]) -> go.Figure:
    return go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name=n) for n in names])


def test_short_label_keeps_start_and_end_within_the_limit() -> None:
    short = short_label(RUN)
    assert len(short) == LEGEND_MAX_CHARS and short.startswith("#12 digits") and short.endswith("UTC")
    assert "…" in short
    assert short_label("p99") == "p99"


def test_shortened_names_stay_unique() -> None:
    a = "digits_classifier_very_long_name_version_a p99"
    b = "digits_classifier_very_long_name_version_b p99"
    first, second = short_labels([a, b])
    assert first != second and max(len(first), len(second)) < len(a)


def test_legend_rows_wrap_at_the_chart_width() -> None:
    assert legend_rows([]) == 0
    assert legend_rows(["queue"]) == 1
    # 20 entries of 14 characters: 40 + 7 * 14 = 138 px each, 3 to a 520 px row
    assert legend_rows(["m" * 14] * 20, CHART_WIDTH_PX) == 7


def test_the_legend_is_under_the_plot_and_the_plot_keeps_its_height() -> None:
    names = [f"model_{i:02d} p{q}" for i in range(5) for q in (50, 90, 99, 100)]  # 20 entries
    few = style(figure(names[:2]), title="t", y_title="ms")
    many = style(figure(names), title="t", y_title="ms")
    for fig in (few, many):
        legend = fig.layout.legend
        assert legend.orientation == "h" and legend.yanchor == "top" and legend.y < 0  # below, not beside
    rows = legend_rows(names)
    assert rows >= 5
    fixed = PLOT_HEIGHT_PX + MARGIN_PX["t"] + MARGIN_PX["b"] + X_AXIS_PX
    assert many.layout.height == fixed + rows * LEGEND_ROW_PX
    assert many.layout.height - few.layout.height == (rows - 1) * LEGEND_ROW_PX  # grows, never squeezes


def test_long_names_are_shortened_in_the_legend_and_whole_in_the_hover() -> None:
    fig = style(figure([RUN, "#11 digits_classifier (dynamic batching off) 2026-12-04 12:31 UTC"]),
                title="Throughput", y_title="inferences/s", x_title="concurrency")
    names = [t.name for t in fig.data]
    assert all(len(n) <= LEGEND_MAX_CHARS for n in names) and len(set(names)) == 2
    assert RUN in fig.data[0].hovertemplate
    assert fig.layout.hoverlabel.namelength == -1


def test_one_series_needs_no_legend() -> None:
    fig = style(figure(["digits_classifier"]), title="Throughput", y_title="inferences/s")
    assert fig.layout.showlegend is False
    assert fig.layout.height == PLOT_HEIGHT_PX + MARGIN_PX["t"] + MARGIN_PX["b"] + X_AXIS_PX


def test_a_revision_resets_the_view() -> None:
    assert style(figure(["a", "b"]), title="t", y_title="ms", revision="1 h").layout.uirevision == "1 h"
