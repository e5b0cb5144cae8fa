"""Render a foxhunt report and screenshot it for the docs (headless Chromium).

    python scripts/make_report_screenshot.py                     # synthetic demo data
    python scripts/make_report_screenshot.py --data report.json  # any report data file
    python scripts/make_report_screenshot.py --save-data demo.json --html demo.html

Writes docs/report-demo.png by default (1400 x 2400 viewport: the header, the fold tables and
the first series' charts). The data file follows the contract in docs/report.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

from foxhunt.errors import FoxhuntError
from foxhunt.report import write_report
from foxhunt.report.browser import dump_dom, screenshot
from foxhunt.report.sample import sample_report_data

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--data", type=Path, help="report data JSON file (default: synthetic demo data)"
    )
    ap.add_argument("--html", type=Path, help="also keep the rendered report here")
    ap.add_argument(
        "--png", type=Path, default=ROOT / "docs" / "report-demo.png", help="screenshot path"
    )
    ap.add_argument("--save-data", type=Path, help="write the data used to this JSON file")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=2400)
    ap.add_argument("--seed", type=int, default=7, help="seed of the synthetic demo data")
    args = ap.parse_args(argv)
    try:
        data = (
            json.loads(args.data.read_text()) if args.data else sample_report_data(seed=args.seed)
        )
        if args.save_data:
            args.save_data.write_text(json.dumps(data))
        with tempfile.TemporaryDirectory(prefix="foxhunt-report-") as tmp:
            html = write_report(data, args.html or Path(tmp) / "report.html")
            dom = dump_dom(html).stdout
            tag = re.search(r"<html[^>]*>", dom)
            attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', tag.group(0) if tag else ""))
            if attrs.get("data-errors") or attrs.get("data-charts-rendered") != attrs.get(
                "data-charts-expected"
            ):
                print(f"report did not render cleanly: {attrs}", file=sys.stderr)
                return 1
            png = screenshot(html, args.png, args.width, args.height)
    except (OSError, json.JSONDecodeError, FoxhuntError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{attrs['data-charts-rendered']} charts rendered; screenshot: {png}")
    if args.html:
        print(f"report: {args.html}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
