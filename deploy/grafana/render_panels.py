#!/usr/bin/env python3
"""Draws the panels of kernel-watchdog.json from a Prometheus's data into one PNG.

Grafana is not needed: each panel's queries go to the Prometheus HTTP API as Grafana would
send them (its variables set, `$__range` and `$__rate_interval` given values), time series
over the range (/api/v1/query_range), stats and tables at its end (/api/v1/query), and
matplotlib draws the results where the panel sits on the dashboard's 24-column grid. It shows
what the queries return, not Grafana's look. The README's picture of the dashboard is made
this way from the Prometheus of tests/integration/test_prometheus.py (KWD_DASHBOARD_PNG).

  render_panels.py --prometheus http://127.0.0.1:9090 --start UNIX --end UNIX --out FILE.png
                   [--dashboard FILE] [--var NAME=REGEX ...] [--summary FILE.json]

--summary writes, for each panel, how many series its queries returned.
"""
import argparse
import json
import pathlib
import re
import sys
import urllib.parse
import urllib.request

DASHBOARD = pathlib.Path(__file__).resolve().parent / "kernel-watchdog.json"


def variables_of(dashboard):
    """The dashboard's query variables, each set to its All value (Grafana's default here)."""
    return {v["name"]: v.get("allValue") or ".*" for v in dashboard["templating"]["list"]
            if v["type"] == "query"}


def expand(text, variables, range_s, rate_interval_s):
    """A query as Grafana sends it: $name and ${name} replaced, and its own $__ variables."""
    builtins = {"__range": f"{int(range_s)}s", "__rate_interval": f"{int(rate_interval_s)}s",
                "__interval": f"{max(1, int(rate_interval_s // 4))}s"}
    values = dict(variables, **builtins)

    def one(m):
        name = m.group(1) or m.group(2)
        if name not in values:
            raise KeyError(f"no value for ${name} in {text!r}")
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, text)


def panels_of(dashboard):
    """Every panel with queries, rows' panels included, in the dashboard's order."""
    out = []
    for p in dashboard["panels"]:
        if p["type"] == "row":
            out.extend(p.get("panels", []))
        else:
            out.append(p)
    return out


def api(prometheus, path, **params):
    data = urllib.parse.urlencode(params).encode()
    with urllib.request.urlopen(prometheus.rstrip("/") + path, data=data, timeout=30) as r:
        answer = json.loads(r.read())
    if answer.get("status") != "success":
        raise RuntimeError(f"{path} {params}: {answer}")
    return answer["data"]


def legend(fmt, labels):
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt or "")
    text = " ".join(text.split())
    return text or json.dumps(labels, sort_keys=True)


def scale(unit, top):
    """How to show values up to `top` of a Grafana unit: (divisor, unit name)."""
    if unit == "bytes":
        for divisor, name in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
            if abs(top) >= divisor:
                return divisor, name
        return 1, "B"
    if unit == "percentunit":
        return 0.01, "%"
    return 1, {"s": "s", "none": ""}.get(unit, unit or "")


def draw_timeseries(ax, panel, results, start, end):
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    custom = defaults.get("custom", {})
    bars = custom.get("drawStyle") == "bars"
    stacked = custom.get("stacking", {}).get("mode") == "normal"
    peaks = [max(abs(float(v)) for _, v in s["values"]) for _, series in results for s in series
             if s["values"]]
    divisor, unit_name = scale(defaults.get("unit", "none"),
                               sum(peaks) if stacked else max(peaks, default=0))
    dashed_refs = {o["matcher"]["options"]
                   for o in panel.get("fieldConfig", {}).get("overrides", [])
                   if o["matcher"]["id"] == "byFrameRefID" and
                   any(prop["id"] == "custom.lineStyle" for prop in o["properties"])}
    # Series stacked as Grafana stacks them: each on those before it, at the query's steps.
    steps = sorted({float(t) for _, series in results for s in series for t, _ in s["values"]})
    below = dict.fromkeys(steps, 0.0)
    for target, series in results:
        dashed = target["refId"] in dashed_refs
        for s in series:
            values = {float(t): float(v) / divisor for t, v in s["values"]}
            ts = sorted(values)
            name = legend(target.get("legendFormat"), s["metric"])
            if bars:
                ax.bar([t - end for t in ts], [values[t] for t in ts],
                       bottom=[below[t] for t in ts] if stacked else None,
                       width=max(1.0, (end - start) / 200), label=name, alpha=0.7)
            elif stacked:
                base = [below[t] for t in steps]
                ax.fill_between([t - end for t in steps], base,
                                [b + values.get(t, 0.0) for b, t in zip(base, steps)],
                                label=name, alpha=0.5, step="post")
            else:
                ax.plot([t - end for t in ts], [values[t] for t in ts], label=name,
                        linestyle="--" if dashed else "-", linewidth=1.2)
            if stacked:
                for t in ts:
                    below[t] += values[t]
    ax.set_xlim(start - end, 0)
    if "min" in defaults:
        ax.set_ylim(bottom=defaults["min"] / divisor)
    if "max" in defaults:
        ax.set_ylim(top=defaults["max"] / divisor)
    ax.set_xlabel("seconds before the end", fontsize=7)
    ax.set_ylabel(unit_name, fontsize=7)
    ax.tick_params(labelsize=7)
    if any(series for _, series in results):
        ax.legend(fontsize=6, loc="upper left")
    else:
        ax.text(0.5, 0.5, "No data", ha="center", va="center", transform=ax.transAxes)


def draw_stat(ax, panel, results):
    values = [float(s["value"][1]) for _, series in results for s in series]
    ax.axis("off")
    if not values:
        ax.text(0.5, 0.45, "No data", ha="center", va="center", fontsize=14)
        return
    divisor, name = scale(panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "none"),
                          sum(values))
    ax.text(0.5, 0.4, f"{sum(values) / divisor:.4g} {name}".strip(), ha="center", va="center",
            fontsize=22)


def draw_table(ax, panel, results):
    excluded = set()
    renamed = {}
    for t in panel.get("transformations", []):
        if t["id"] == "organize":
            excluded |= {k for k, v in t["options"].get("excludeByName", {}).items() if v}
            renamed.update(t["options"].get("renameByName", {}))
    # Grafana's merge: one row per label set the queries share, a value column per query.
    rows, columns = {}, []
    single = len(results) == 1
    for target, series in results:
        column = renamed.get("Value" if single else f"Value #{target['refId']}", target["refId"])
        columns.append(column)
        for s in series:
            key = tuple(sorted((k, v) for k, v in s["metric"].items()
                               if k not in excluded and k != "__name__"))
            for known in rows:  # a query aggregated by fewer labels joins on those it has
                if set(key) <= set(known) or set(known) <= set(key):
                    key = max(known, key, key=len)
                    rows[key] = rows.pop(known)
                    break
            rows.setdefault(key, {})[column] = float(s["value"][1])
    ax.axis("off")
    if not rows:
        ax.text(0.5, 0.5, "No data", ha="center", va="center")
        return
    label_names = sorted({k for key in rows for k, _ in key})
    header = label_names + columns
    cells = []
    for key, values in sorted(rows.items()):
        labels = dict(key)
        row = [labels.get(n, "")[:40] for n in label_names]
        for c in columns:
            v = values.get(c)
            if v is None:
                row.append("")
            elif c == "died at":
                import datetime
                row.append(datetime.datetime.fromtimestamp(
                    v / 1000, datetime.timezone.utc).strftime("%H:%M:%S"))
            elif c in ("memory", "cgroup limit"):
                row.append(f"{v / (1 << 20):.0f} MiB")
            else:
                row.append(f"{v:.4g}")
        cells.append(row)
    table = ax.table(cellText=cells[:12], colLabels=header, loc="upper center", cellLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(6)


def render(prometheus, start, end, out, dashboard_file=DASHBOARD, overrides=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dashboard = json.loads(pathlib.Path(dashboard_file).read_text())
    variables = dict(variables_of(dashboard), **(overrides or {}))
    range_s = max(1, end - start)
    step = max(1, int(range_s / 300))
    rate_interval = max(4 * step, 15)
    rows_high = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"])
    unit_h = 0.42
    fig = plt.figure(figsize=(18, rows_high * unit_h))
    summary = {}
    for p in dashboard["panels"]:
        g = p["gridPos"]
        left, width = g["x"] / 24, g["w"] / 24
        bottom, height = 1 - (g["y"] + g["h"]) / rows_high, g["h"] / rows_high
        if p["type"] == "row":
            fig.text(0.01, bottom + height / 2, p["title"], fontsize=13, weight="bold",
                     va="center")
            continue
        ax = fig.add_axes([left + 0.06 * width, bottom + 0.12 * height,
                           width * 0.91, height * (0.70 if p["type"] == "timeseries" else 0.78)])
        results = []
        for t in p["targets"]:
            expr = expand(t["expr"], variables, range_s, rate_interval)
            if p["type"] == "timeseries":
                data = api(prometheus, "/api/v1/query_range", query=expr, start=start, end=end,
                           step=step)
            else:
                data = api(prometheus, "/api/v1/query", query=expr, time=end)
            results.append((t, data["result"]))
        summary[p["title"]] = sum(len(series) for _, series in results)
        ax.set_title(p["title"], fontsize=9, loc="left")
        if p["type"] == "timeseries":
            draw_timeseries(ax, p, results, start, end)
        elif p["type"] == "stat":
            draw_stat(ax, p, results)
        else:
            draw_table(ax, p, results)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prometheus", required=True)
    ap.add_argument("--start", type=float, required=True)
    ap.add_argument("--end", type=float, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dashboard", default=str(DASHBOARD))
    ap.add_argument("--var", action="append", default=[], help="NAME=REGEX")
    ap.add_argument("--summary")
    args = ap.parse_args()
    overrides = dict(v.split("=", 1) for v in args.var)
    summary = render(args.prometheus, args.start, args.end, args.out, args.dashboard, overrides)
    if args.summary:
        pathlib.Path(args.summary).write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
