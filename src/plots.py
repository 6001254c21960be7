"""Pictures of runs: loss curves from the JSON-lines run records, accuracy per variant.

Every training stage appends to <params>.log.jsonl (src/submission/trainer.py): a "start"
line with the run's function, variant and settings, one "epoch" line per epoch (mean_loss,
last_loss, lr, tokens, seconds), then "end", "interrupted" or "non-finite loss".  People
would rather look at a loss curve than read those lines, so:

    python src/plots.py out/quickstart/*.log.jsonl --out losses.png
    ./run.sh plot src/submission/*.log.jsonl --out losses.png

draws the loss figure for any records, and a job that ends with a results table (the quick
preset, ./run.sh reproduce) calls plot_summary() for one figure with the loss curves of
every stage beside the accuracy of every variant against the baseline and the course's bars.

matplotlib is optional: without it the plotting functions print NOTICE and return None, so
the job still finishes.  Figures are drawn with the Agg backend on a Figure of their own:
no window, no pyplot state shared with the caller.
"""

import argparse
import json
import sys
import textwrap
from pathlib import Path

NOTICE = "notice: matplotlib is not installed; no figure written (pip install matplotlib)"
FUNCTIONS = ("pretrain", "finetune")  # loss panels in this order; any other function after them
SPLITS = {"dev": "#3b5b92", "test": "#9fb6d9"}  # bar colours
STYLES = ("-", "--", ":", "-.")  # runs of one variant in one panel (e.g. with and without pretraining)


class PlotError(ValueError):
    """A record that cannot be read or a figure that cannot be written: one line naming the file."""


def read_record(path):
    """The latest run in one record file:
    {"path", "label", "function", "variant", "epochs", "mean_loss", "lr", "ended"}.

    A params path trained twice holds two runs, one after the other: the latest is the one
    its params came from.  A resumed run ("start" with first_epoch > 0) continues the one
    before it, its epochs replacing those it redid.  ended is the last event after the
    epochs ("end", "interrupted", "non-finite loss"), or None for a run still going or killed.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise PlotError(f"{path}: cannot read the run record: {e.strerror}") from None
    except UnicodeDecodeError:
        raise PlotError(f"{path}: not a run record (not UTF-8 text)") from None
    run = None
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            r = None
        if not isinstance(r, dict) or not isinstance(r.get("event"), str):
            raise PlotError(f"{path}: line {n} is not a run record's JSON object with an \"event\"")
        if r["event"] == "start":
            first = r.get("first_epoch") or 0
            if run is None or first == 0:
                run = dict(function=r.get("function"), variant=r.get("variant"), epochs={})
            run["epochs"] = {e: v for e, v in run["epochs"].items() if e <= first}
            run["ended"] = None
        elif run is None:
            raise PlotError(f"{path}: line {n} ({r['event']!r}) comes before any \"start\" line")
        elif r["event"] == "epoch":
            try:
                run["epochs"][int(r["epoch"])] = (float(r["mean_loss"]), float(r["lr"]))
            except (KeyError, TypeError, ValueError):
                raise PlotError(f"{path}: line {n}: an epoch line needs a number for epoch, "
                                f"mean_loss and lr") from None
        else:
            run["ended"] = r["event"]
    if run is None:
        raise PlotError(f"{path}: no \"start\" line: not a <params>.log.jsonl run record")
    epochs = sorted(run.pop("epochs").items())
    name = Path(path).name.removesuffix(".log.jsonl").removesuffix(".params")
    return dict(run, path=str(path), label=name, epochs=[e for e, _ in epochs],
                mean_loss=[v[0] for _, v in epochs], lr=[v[1] for _, v in epochs])


def _read_all(records):
    """records: paths, or (label, path) pairs."""
    if not records:
        raise ValueError("no run records to draw")
    runs = []
    for item in records:
        label, path = item if isinstance(item, (tuple, list)) else (None, item)
        run = read_record(path)
        if label:
            run["label"] = str(label)
        runs.append(run)
    return runs


def _check_rows(rows):
    for row in rows:
        if "variant" not in row:
            raise ValueError(f"an accuracy row needs a 'variant': {row!r}")
        for key in ("dev", "test", "bar"):
            v = row.get(key)
            if v is not None and not 0 <= v <= 1:
                raise ValueError(f"{row['variant']}: {key} {v!r} is not a fraction in [0, 1]")
    return rows


def _figure_class():
    """matplotlib's Figure, or None (after printing NOTICE) when matplotlib is missing."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        print(NOTICE, flush=True)
        return None
    del matplotlib

    def new_figure(**kw):
        fig = Figure(**kw)
        FigureCanvasAgg(fig)  # the Agg backend: files only, never a window
        return fig
    return new_figure


def _save(fig, out):
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=110)
    except OSError as e:
        raise PlotError(f"{out}: cannot write the figure: {e.strerror}") from None
    except ValueError as e:  # e.g. a format matplotlib does not know
        raise PlotError(f"{out}: cannot write the figure: {e}") from None
    return out


def _functions(runs):
    """The training functions of runs, pretrain and finetune first."""
    return sorted({r["function"] or "training" for r in runs},
                  key=lambda f: (FUNCTIONS.index(f) if f in FUNCTIONS else len(FUNCTIONS), f))


def _draw_losses(fig, grid, runs):
    """One column of grid (two rows: 3 : 1) per training function: mean loss per epoch on a
    log scale above, the learning rate at each epoch's end below.  A variant keeps its
    colour across the columns."""
    from matplotlib.ticker import LogFormatter  # matplotlib is there: _figure_class() said so

    colours = {}
    for r in runs:
        colours.setdefault(r["variant"], f"C{len(colours) % 10}")
    for col, function in enumerate(_functions(runs)):
        loss_ax = fig.add_subplot(grid[0, col])
        lr_ax = fig.add_subplot(grid[1, col], sharex=loss_ax)
        seen, mine = {}, [r for r in runs if (r["function"] or "training") == function]
        for r in mine:
            style = STYLES[seen.get(r["variant"], 0) % len(STYLES)]
            seen[r["variant"]] = seen.get(r["variant"], 0) + 1
            marker = "o" if len(r["epochs"]) <= 30 else None
            label = r["label"] + ("" if r["ended"] in ("end", None) and r["epochs"] else
                                  " (no epochs)" if not r["epochs"] else f" ({r['ended']})")
            kw = dict(color=colours[r["variant"]], linestyle=style, marker=marker, markersize=3)
            loss_ax.plot(r["epochs"], r["mean_loss"], label=label, **kw)
            lr_ax.plot(r["epochs"], r["lr"], **kw)
        loss_ax.set_yscale("log")
        for axis in (loss_ax.yaxis.set_major_formatter, loss_ax.yaxis.set_minor_formatter):
            axis(LogFormatter(labelOnlyBase=False))  # 0.3, 2, 3 rather than 3 x 10^-1 ...
        loss_ax.set_title(f"{function}: mean training loss per epoch")
        loss_ax.set_ylabel("mean loss (log scale)")
        loss_ax.grid(True, which="both", alpha=0.3)
        loss_ax.legend(fontsize="small")
        loss_ax.tick_params(labelbottom=False)
        lr_ax.set_ylabel("learning rate")
        lr_ax.set_xlabel("epoch")
        lr_ax.set_ylim(0, 1.1 * max(max(r["lr"], default=0) for r in mine) or None)  # from 0: the schedule's shape
        lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
        lr_ax.grid(True, alpha=0.3)
        lr_ax.xaxis.get_major_locator().set_params(integer=True)


def _draw_accuracy(ax, rows, baseline):
    """Dev and test accuracy per variant as bars, the baseline as a dashed line across, and
    each variant's course bar (a dev accuracy to reach) as a black line over its dev bar."""
    splits = [s for s in SPLITS if any(r.get(s) is not None for r in rows)] or ["dev"]
    width = 0.8 / len(splits)
    top = max([r.get(k) or 0 for r in rows for k in ("dev", "test", "bar")] + [baseline or 0, 0.1])
    for j, split in enumerate(splits):
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(rows))]
        values = [r.get(split) for r in rows]
        ax.bar([x for x, v in zip(xs, values) if v is not None],
               [100 * v for v in values if v is not None], width, color=SPLITS[split], label=split)
        for x, v in zip(xs, values):
            ax.annotate("n/a" if v is None else f"{100 * v:.1f}%", (x, 100 * (v or 0)),
                        xytext=(0, 2), textcoords="offset points", ha="center", fontsize="small")
    if baseline is not None:
        ax.axhline(100 * baseline, color="tab:red", linestyle="--",
                   label=f"baseline {100 * baseline:.1f}%")
    barred = [(i, r["bar"]) for i, r in enumerate(rows) if r.get("bar") is not None]
    left, right = (-0.45, -0.35 + width) if "dev" in splits else (-0.45, 0.45)
    for k, (i, bar) in enumerate(barred):
        ax.hlines(100 * bar, i + left, i + right, color="black", linewidth=2.5,
                  label="course bar (dev)" if k == 0 else None)
    ax.set_xticks(range(len(rows)), [textwrap.fill(str(r["variant"]), 16) for r in rows])
    ax.set_xlim(-0.6, len(rows) - 0.4)
    ax.set_ylim(0, 100 * top * 1.2)
    ax.set_ylabel("accuracy (%)")
    ax.set_title("accuracy per variant")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")


def plot_losses(records, out, title=None):
    """Draw the loss curves of training runs into the image file out (PNG, or any format
    matplotlib knows by its suffix).

    records: record files (<params>.log.jsonl), each a path or a (label, path) pair; a bare
    path is labelled by its file name.  Returns out as a Path, or None without matplotlib.
    Raises PlotError for a record that cannot be read or a figure that cannot be written."""
    runs = _read_all(records)
    new_figure = _figure_class()
    if new_figure is None:
        return None
    n = len(_functions(runs))
    fig = new_figure(figsize=(5.2 * n + 0.6, 5.6), layout="constrained")
    _draw_losses(fig, fig.add_gridspec(2, n, height_ratios=[3, 1]), runs)
    if title:
        fig.suptitle(title)
    return _save(fig, out)


def plot_accuracy(rows, out, baseline=None, title=None):
    """Draw accuracy per variant into the image file out.

    rows: dicts {"variant": label, "dev": accuracy or None, "test": accuracy or None,
    "bar": the course's threshold or None} (accuracies as fractions in [0, 1]; a missing key
    is None); baseline: the most common place's accuracy, or None.  Returns out as a Path,
    or None without matplotlib."""
    rows = _check_rows(list(rows))
    new_figure = _figure_class()
    if new_figure is None:
        return None
    fig = new_figure(figsize=(1.6 * len(rows) + 2.4, 5.0), layout="constrained")
    _draw_accuracy(fig.add_subplot(), rows, baseline)
    if title:
        fig.suptitle(title)
    return _save(fig, out)


def plot_summary(records, rows, out, baseline=None, title=None):
    """One figure for a job's results: the loss curves of every stage (records, as for
    plot_losses) beside the accuracy per variant (rows and baseline, as for plot_accuracy).
    Returns out as a Path, or None without matplotlib."""
    runs, rows = _read_all(records), _check_rows(list(rows))
    new_figure = _figure_class()
    if new_figure is None:
        return None
    n = len(_functions(runs))
    acc_width = 1.3 * len(rows) + 2.2
    fig = new_figure(figsize=(5.2 * n + acc_width + 0.6, 5.6), layout="constrained")
    grid = fig.add_gridspec(2, n + 1, height_ratios=[3, 1], width_ratios=[5.2] * n + [acc_width])
    _draw_losses(fig, grid, runs)
    _draw_accuracy(fig.add_subplot(grid[:, n]), rows, baseline)
    if title:
        fig.suptitle(title)
    return _save(fig, out)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Draw the loss curves of training runs from their "
                                             "JSON-lines records (<params>.log.jsonl).")
    ap.add_argument("records", nargs="+", metavar="RECORD.log.jsonl")
    ap.add_argument("--out", required=True, metavar="FIGURE.png", help="the image file to write")
    ap.add_argument("--title", default=None)
    args = ap.parse_args(argv)
    try:
        written = plot_losses(args.records, args.out, title=args.title)
    except PlotError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if written:
        print(f"written: {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
