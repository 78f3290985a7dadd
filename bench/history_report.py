#!/usr/bin/env python3
"""bench/history's report: PREFIX.md (a table per backend) and PREFIX.svg (the curves), from the
JSON files bench-history wrote.

    python3 bench/history_report.py bench/results/DATE-history bench/results/DATE-history-*.json
"""

import json
import math
import pathlib
import sys

SHOWN = ["page 1", "next page (links.next)", "next page (page=N, as_of)", "one member's page",
         "a regular's page (full)", "status=denied", "one day (from/to)", "middle page by number"]
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#7f7f7f"]


def table(name, report):
    steps = report["steps"]
    head = "| request | " + " | ".join(f"{s['rows']:,} rows" for s in steps) + " | last / first |"
    lines = [f"### {name}", "", head, "|---" * (len(steps) + 2) + "|"]
    keys = [k for k in SHOWN if k in steps[0]["costs_ms"]] + sorted(set(steps[0]["costs_ms"]) - set(SHOWN))
    for key in keys:
        vals = [s["costs_ms"][key] for s in steps]
        ratio = vals[-1] / vals[0] if vals[0] else float("nan")
        lines.append(f"| {key} (ms) | " + " | ".join(f"{v:.1f}" for v in vals) + f" | {ratio:.2f} |")
    rates = [s["import_rows_per_s"] for s in steps]
    lines.append("| import (rows/s) | " + " | ".join(f"{r:,.0f}" for r in rates)
                 + f" | {rates[-1] / rates[0]:.2f} |")
    if all("import_step_rows_per_s" in s for s in steps):
        averages = [s["import_step_rows_per_s"] for s in steps]
        lines[-1] = lines[-1].replace("| import (rows/s) |", "| import, the step's last 20,000 rows (rows/s) |")
        lines.append("| import, the whole step (rows/s) | " + " | ".join(f"{r:,.0f}" for r in averages) + " | |")
    walks = ["—" if s["walk_s"] is None else f"{s['walk_s']:.1f}" for s in steps]
    lines.append("| whole walk by links.next (s) | " + " | ".join(walks) + " | |")
    return "\n".join(lines) + "\n"


def svg(reports):
    w, h, pad = 300, 240, 44
    panels = len(reports)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{panels * w + 220}" height="{h + 40}" '
           'font-family="sans-serif" font-size="10">']
    for i, (name, report) in enumerate(reports):
        x0 = i * w
        rows = [s["rows"] for s in report["steps"]]
        xs = [math.log10(r) for r in rows]
        lo, hi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
        ymin, ymax = -1.0, 3.5  # 0.1 ms to 3 s
        px = lambda v: x0 + pad + (v - lo) / (hi - lo) * (w - pad - 10)
        py = lambda ms: 10 + (ymax - math.log10(max(ms, 0.1))) / (ymax - ymin) * (h - 30)
        out.append(f'<text x="{x0 + pad}" y="{h + 30}">{name}: ms per request (log) against rows (log)</text>')
        for ms in [0.1, 1, 10, 100, 1000]:
            out.append(f'<line x1="{x0 + pad}" x2="{x0 + w - 10}" y1="{py(ms):.1f}" y2="{py(ms):.1f}" stroke="#ddd"/>')
            out.append(f'<text x="{x0 + 4}" y="{py(ms) + 3:.1f}">{ms:g} ms</text>')
        for r, x in zip(rows, xs):
            out.append(f'<text x="{px(x) - 12:.1f}" y="{h + 12}">{r:,}</text>')
        for key, colour in zip(SHOWN, COLOURS):
            pts = [(px(x), py(s["costs_ms"].get(key, 0.1))) for x, s in zip(xs, report["steps"])]
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
    for j, (key, colour) in enumerate(zip(SHOWN, COLOURS)):
        y = 20 + j * 14
        out.append(f'<rect x="{panels * w + 10}" y="{y - 8}" width="10" height="3" fill="{colour}"/>')
        out.append(f'<text x="{panels * w + 24}" y="{y}">{key}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    prefix, files = sys.argv[1], sys.argv[2:]
    reports = []
    for f in sorted(files):
        report = json.loads(pathlib.Path(f).read_text())
        name = pathlib.Path(f).stem.rsplit("-", 1)[-1]
        reports.append((name, report))
    md = [f"# bench/history ({pathlib.Path(prefix).name})", "",
          f"One gym, 10,000 members, check-ins grown through the import API; per_page=100, median of "
          f"{reports[0][1]['samples']} requests one at a time (release build, this 2-core machine).", ""]
    md += [table(name, r) for name, r in reports]
    md.append(f"![curves]({pathlib.Path(prefix).name}.svg)\n")
    pathlib.Path(prefix + ".md").write_text("\n".join(md))
    pathlib.Path(prefix + ".svg").write_text(svg(reports))
    print(f"wrote {prefix}.md and {prefix}.svg")


if __name__ == "__main__":
    main()
