"""What the UI shows of a campaign in materialisation metadata: step x/N, a batch preview, the
per-step metrics table and a rendered plot of them against the step (Dagster's own metadata plots
use wall-clock time or partitions as the x axis, and a campaign is one partition)."""

from __future__ import annotations

import base64
import io
import math

import dagster as dg
import pandas as pd

from envsched_core import metric_names as names

PLOTTED = (
    (names.HELDOUT_SCORE, "held-out score"),
    (names.MEAN_VARIANCE, "selected-task mean reward variance"),
    (names.ENVS_PER_BATCH, "environments per batch"),
    (names.EXPLOIT_HIT_RATE, "exploitation hit rate"),
    (names.ZERO_VARIANCE_GROUPS, "zero-variance groups"),
    (names.TOOLS_PER_BATCH, "tools per batch"),
)


def progress_text(step: int, steps: int) -> str:
    return f"step {step}/{steps}"


def _markdown(frame: pd.DataFrame) -> str:
    def cell(value) -> str:
        if isinstance(value, float):
            return "" if math.isnan(value) else f"{value:.4g}"
        return str(value).replace("|", "\\|")

    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "| " + " | ".join("---" for _ in frame.columns) + " |"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def batch_preview(batch: pd.DataFrame, rows: int = 20) -> dg.MetadataValue:
    """The first ``rows`` tasks of a batch with their role and predicted variance."""
    shown = batch[["task_id", "env_id", "role", "predicted_variance"]].head(rows)
    more = f"\n\n({len(batch) - rows} more)" if len(batch) > rows else ""
    return dg.MetadataValue.md(_markdown(shown) + more)


def metrics_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """The summary columns of ``step_metrics`` (one row per step), short headers, step first."""
    shown = metrics[[c for c in names.SUMMARY if c in metrics.columns]].rename(columns=names.SUMMARY)
    return shown.reset_index().rename(columns={"index": "step"})


def render_plot(metrics: pd.DataFrame, campaign_id: str) -> bytes | None:
    """A PNG of the plotted metrics against the step; None without matplotlib or metrics.

    Drawn on a bare ``Figure`` with a fixed layout: pyplot's figure manager and ``tight_layout`` (which
    draws the figure twice) made this half a second of every step."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError:  # matplotlib is in the dev extra; the table still shows
        return None
    panels = [(name, label) for name, label in PLOTTED if name in metrics.columns]
    if not panels or metrics.empty:
        return None
    fig = Figure(figsize=(3.2 * len(panels), 2.6))
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, (name, label) in zip(axes[0], panels, strict=True):
        series = metrics[name].dropna()
        ax.plot(series.index, series.to_numpy(), marker="o", lw=1.5)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(f"campaign {campaign_id}", fontsize=10)
    fig.subplots_adjust(left=0.3 / len(panels), right=0.99, bottom=0.17, top=0.8, wspace=0.3)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    return buffer.getvalue()


def step_metrics_metadata(metrics: pd.DataFrame, campaign_id: str) -> dict[str, dg.MetadataValue]:
    """``metrics_by_step`` (a table, one row per step) and ``metrics_plot`` (the PNG, inline)."""
    if metrics.empty:
        return {}
    out = {"metrics_by_step": dg.MetadataValue.md(_markdown(metrics_table(metrics)))}
    png = render_plot(metrics, campaign_id)
    if png is not None:
        encoded = base64.b64encode(png).decode()
        out["metrics_plot"] = dg.MetadataValue.md(f"![metrics by step](data:image/png;base64,{encoded})")
    return out
