#!/usr/bin/env python3
"""recheck page in a real browser: a run of a mutant, a fuzzing campaign's folder and a report cut
short make one page; headless Chromium (Debian's `chromium`) loads it, and this test checks what
it shows, from its DOM and from its screenshot.

  tests/page_in_browser.py RECHECK OUT_DIR

Leaves OUT_DIR/page.html and OUT_DIR/page.png (look at it). Exit 0 passed, 1 failed, 77 skipped
(no chromium on PATH: `apt-get install chromium`; ci/setup installs it).
"""
import html
import json
import os
import re
import subprocess
import sys

import headless_chromium
from picture_in_browser import near, png_pixels

BLUE = (0x1F, 0x77, 0xB4)  # the first series' colour (cli/page.cpp)
WIDTH, HEIGHT = 1150, 1400


def fail(message):
    print(f"page_in_browser: FAIL: {message}")
    sys.exit(1)


def recheck_run(recheck, *args, ok=(0, 1)):
    run = subprocess.run([recheck, *args], capture_output=True, text=True)
    if run.returncode not in ok:
        fail(f"recheck {' '.join(args)} exited {run.returncode}: {run.stdout[-800:]}{run.stderr[-800:]}")
    return run


def main(recheck, out):
    browser = headless_chromium.find()
    if browser is None:
        print("page_in_browser: skipped: no chromium on PATH (apt-get install chromium)")
        return 77
    os.makedirs(out, exist_ok=True)
    run_report = os.path.join(out, "run.json")
    recheck_run(recheck, "run", "--sut", "cpu-rng-only", "--seed", "1", "--cases", "300", "--quiet",
                "--minimize-seconds", "10", "--out", os.path.join(out, "findings"), "--json", run_report)
    # A campaign's folder as tools/campaign leaves it: summary.json, libFuzzer's fork-mode log,
    # and buckets.json (recheck triage of its crash files; here, the run's case files).
    campaign = os.path.join(out, "campaign")
    os.makedirs(campaign, exist_ok=True)
    with open(os.path.join(campaign, "summary.json"), "w") as f:
        json.dump({"target": "check", "sut": "cpu-rng-only", "device": "cpu", "findings": 3}, f)
    with open(os.path.join(campaign, "fuzz.log"), "w") as f:
        for t in range(1, 11):
            f.write(f"#{t * 1000}: cov: {100 + t} ft: {200 + 10 * t} corp: {t} exec/s: 1000 oom/timeout/crash: 0/0/{t // 4} "
                    f"time: {t * 6}s job: {t} dft_time: 0\n")
    recheck_run(recheck, "triage", os.path.join(out, "findings"), "--sut", "cpu-rng-only", "--minimize-seconds", "0",
                "--out", os.path.join(campaign, "findings"), "--json", os.path.join(campaign, "buckets.json"))
    half = os.path.join(out, "half.json")
    with open(half, "w") as f:
        f.write('{"tool": "recheck", "command": "run", "buckets": [')
    page, png = os.path.join(out, "page.html"), os.path.join(out, "page.png")
    made = recheck_run(recheck, "page", run_report, campaign, half, "--out", page, "--title", "recheck: a test campaign",
                       ok=(0,))
    if "1 incomplete" not in made.stdout:
        fail(f"recheck page does not count the report cut short as incomplete: {made.stdout}")

    with open(page) as f:
        source = f.read()
    if re.search(r'(src|href)="(https?:)?//', source):
        fail("the page loads something from the network")

    dom = headless_chromium.run(browser, "--dump-dom", "file://" + page)
    if dom.returncode != 0:
        fail(f"chromium --dump-dom exited {dom.returncode}: {dom.stderr[-500:]}")
    shown = dom.stdout

    # The buckets: the run's and the campaign's merged, a row each, alarms first.
    merged = {}
    for report in (run_report, os.path.join(campaign, "buckets.json")):
        for b in json.load(open(report))["buckets"]:
            merged[b["signature"]] = merged.get(b["signature"], 0) + b["count"]
    rows = re.findall(r'<tr class="bucket( alarm)?" data-count="(\d+)" data-signature="([^"]*)"', shown)
    if len(rows) != len(merged):
        fail(f"the page has {len(rows)} bucket rows, the reports {len(merged)} signatures")
    for _, count, signature in rows:
        if merged.get(html.unescape(signature)) != int(count):
            fail(f"bucket {html.unescape(signature)!r} shows {count}, the reports add up to {merged.get(html.unescape(signature))}")
    alarms = [bool(a) for a, _, _ in rows]
    if alarms != sorted(alarms, reverse=True) or not alarms[0]:
        fail("the alarms are not listed first")
    summary = re.search(r'id="summary" data-findings="(\d+)"', shown)
    if not summary or int(summary.group(1)) != sum(merged.values()):
        fail(f"the summary counts {summary and summary.group(1)} findings, the reports {sum(merged.values())}")

    # Over time: the run's cases, coverage and buckets, the campaign's executions and features.
    for quantity in ("cases checked (recheck run)", "coverage: the generator's corner labels reached",
                     "buckets (causes found)", "executions (libFuzzer)", "coverage: libFuzzer features"):
        chart = re.search(r'<svg class="chart" data-quantity="' + re.escape(html.escape(quantity, quote=True).replace("&#x27;", "'"))
                          + r'".*?</svg>', shown, re.S)
        if not chart:
            fail(f"no chart of {quantity!r}")
        points = re.findall(r'points="([^"]*)"', chart.group(0))
        if not points or len(points[0].split()) < 2:
            fail(f"the chart of {quantity!r} draws no line")
    progress = json.load(open(run_report))["progress"]
    if progress[-1]["cases"] != 300:
        fail(f"the run's progress ends at {progress[-1]['cases']} cases, not 300")

    # Each minimized case as `recheck show` prints it, and the replay lines.
    minimized = [b for b in json.load(open(run_report))["buckets"] if b["minimized"]]
    if not minimized:
        fail("the run minimized no bucket")
    for b in minimized:
        printed = recheck_run(recheck, "show", b["minimized"], ok=(0,)).stdout
        if html.escape(printed.strip(), quote=False) not in shown:
            fail(f"the page does not show {b['minimized']} as recheck show prints it")
        if html.escape(b["replay"], quote=False) not in shown:
            fail(f"the page has no replay line {b['replay']!r}")
    if "incomplete: " + half not in shown:
        fail("the report cut short is not listed as incomplete")

    shot = headless_chromium.run(browser, f"--screenshot={png}", "file://" + page, window=(WIDTH, HEIGHT))
    if shot.returncode != 0 or not os.path.exists(png):
        fail(f"chromium --screenshot exited {shot.returncode}: {shot.stderr[-500:]}")
    pixels = png_pixels(png)
    line = sum(near(p, BLUE) for row in pixels[100:700] for p in row)
    if line < 300:
        fail(f"the first chart's line covers {line} pixels of the screenshot's top (expected a line across it)")
    print(f"page_in_browser: OK: {page} shows {len(rows)} buckets, 5 charts, {len(minimized)} minimized cases; "
          f"screenshot {png}")
    return 0


if __name__ == "__main__":
    headless_chromium.main_of(main, __doc__)
