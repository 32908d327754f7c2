"""One layout for every plotly chart of the dashboard (Metrics, Load test, NPUs).

A legend beside the plot takes its width, and a long horizontal legend under a chart of fixed
height takes its height: a 20-entry legend squeezed the Metrics latency plot to ~80 px. So
`style` puts the legend under the plot, shortens long entries (the full name stays in the
hover), and makes the figure taller by the rows the legend needs, so the plot itself keeps
`PLOT_HEIGHT_PX` whatever the number of series. What a chart shows (its series) is prepared
in geadmin; this module only lays it out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import plotly.graph_objects as go

PLOT_HEIGHT_PX = 260  # the plotting area, kept whatever the legend
MARGIN_PX = {"l": 10, "r": 10, "t": 40, "b": 10}
X_AXIS_PX = 30  # tick labels under the plot
X_TITLE_PX = 20
LEGEND_ROW_PX = 22
LEGEND_MAX_CHARS = 24  # a legend entry longer than this is shortened in the middle
CHART_WIDTH_PX = 520  # a chart in one of two columns of a wide page: for counting legend rows
ENTRY_PX = 40  # an entry's symbol and gaps
CHAR_PX = 7  # an average character at plotly's 12 px legend font
ELLIPSIS = "…"


def short_label(text: str, limit: int = LEGEND_MAX_CHARS) -> str:
    """`text` cut in the middle to `limit` characters: its start and its end stay (model names
    start, run numbers and quantiles end), e.g. "digits_class…ier p99"."""
    if len(text) <= limit:
        return text
    tail = (limit - 1) // 2
    return text[: limit - 1 - tail] + ELLIPSIS + text[len(text) - tail:]


def short_labels(names: Sequence[str], limit: int = LEGEND_MAX_CHARS) -> list[str]:
    """Each name shortened, still unique: a collision keeps a longer tail until it differs."""
    shortened = [short_label(n, limit) for n in names]
    for i, name in enumerate(names):
        width = limit
        while shortened.count(shortened[i]) > 1 and width < len(name):
            width += 2
            shortened[i] = short_label(name, width)
    return shortened


def legend_rows(names: Iterable[str], width_px: int = CHART_WIDTH_PX) -> int:
    """How many rows a horizontal legend of these entries takes at `width_px` (plotly packs
    entries left to right and wraps)."""
    rows, used = 0, width_px
    for name in names:
        entry = ENTRY_PX + CHAR_PX * len(name)
        if used + entry > width_px:
            rows, used = rows + 1, 0
        used += entry
    return rows


def style(fig: go.Figure, *, title: str, y_title: str, x_title: str | None = None,
          width_px: int = CHART_WIDTH_PX, revision: str | None = None) -> go.Figure:
    """Title and axes; the legend under the plot with shortened entries (none for one series);
    the height grown by the legend's rows. `revision`: a change (e.g. the time range) that
    must reset a zoomed view (plotly's uirevision)."""
    shown = [t for t in fig.data if t.name and t.showlegend is not False]
    for trace, short in zip(shown, short_labels([t.name for t in shown]), strict=True):
        if short != trace.name:
            if trace.hovertemplate is None and trace.hoverinfo is None:
                trace.hovertemplate = f"%{{x}}<br>%{{y}}<extra>{trace.name}</extra>"
            trace.name = short
    with_legend = len(shown) > 1
    rows = legend_rows([t.name for t in shown], width_px) if with_legend else 0
    below_px = X_AXIS_PX + (X_TITLE_PX if x_title else 0)
    height = PLOT_HEIGHT_PX + MARGIN_PX["t"] + MARGIN_PX["b"] + below_px + rows * LEGEND_ROW_PX
    fig.update_layout(
        title=title, height=height, margin=MARGIN_PX, showlegend=with_legend,
        legend={"orientation": "h", "x": 0, "xanchor": "left", "yanchor": "top",
                "y": -below_px / PLOT_HEIGHT_PX, "title": {"text": ""}},
        hoverlabel={"namelength": -1}, yaxis_title=y_title, xaxis_title=x_title,
        uirevision=revision)
    return fig

