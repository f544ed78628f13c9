#!/usr/bin/env python3
"""Checks what a reader sees on tprof report's page (issue 40, item 6), from
the DOM that headless Chromium dumped of a copy of the page carrying
page_probe.js (chromium_test.sh):
   check_page.py DOM            the page as written
   check_page.py DOM --inject [--colours FILE]
                                the page whose data page_probe.js rewrote
                                (#inject=idle): every part in every step;
                                FILE gets the legend's colours, "R,G,B" a line
Always: no tooltip splits a number across lines or leaves its chart, no
name overflows its box (long ones are cut in the middle, never at the
end), the histograms' tick labels are evenly spaced with the digits that
takes (log axes: increasing), their median and mean labels inside the plot
area, clear of the y axis and of each other. From the environment:
   STEP_SCALE=1            the step chart's scale is set by its bars (and
                           CPU ticks), not by the launch backlog
   STEP_DEVICE_MIN_US=N    the median bar (the step on the device) >= N us
   STEP_COMPUTE_MIN_PCT=N  the overview line gives compute N% or more
   BACKLOG=1               the backlog drawn as its own series, every step
   NO_STEPS=1              the step chart's empty text is true of any trace
   LOG_X=N                 N histograms or more on a log x axis
   NAMES_ELIDED=N          N names or more cut in the middle
   COMPARE=1               the compare page's name lists: one item per name,
                           8 px or more between two names
Prints what it read; exits 1 with the failures."""
import html
import json
import os
import re
import statistics
import sys

dom = open(sys.argv[1], encoding="utf-8").read()
inject = "--inject" in sys.argv[2:]
env = os.environ.get
fails = []


def fail(msg):
    fails.append(msg)


m = re.search(r'<pre id="probe-result" hidden="">(.*?)</pre>', dom, re.S)
if not m:
    sys.exit("FAIL: the probe left no result (#probe-result)")
probe = json.loads(html.unescape(m.group(1)))

UNITS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def ns_of(label):
    v, u = label.replace("\u00a0", " ").split(" ")
    return float(v) * UNITS[u]


def attrs(tag):
    return {k: html.unescape(v) for k, v in re.findall(r' ([a-z-]+)="([^"]*)"', tag)}


def element(id_):
    t = re.search(r'<[a-z]+\b[^>]* id="%s"[^>]*>' % re.escape(id_), dom)
    return attrs(t.group(0)) if t else None


# Tooltips: numbers whole, the tip inside its chart.
tips = probe["tips"]
print(f"tooltips: {len(tips)} looked at")
if not tips:
    fail("no tooltip appeared where the probe hovered")
for t in tips:
    if t["broken"]:
        fail(f"{t['box']} tooltip at x={t['x']} splits {t['broken']} across lines: {t['text']!r}")
    if not t["inside"]:
        fail(f"{t['box']} tooltip at x={t['x']} runs past its chart")
    for line in t["text"].split("\n"):
        if "1 ms or more" in line:
            vals = [ns_of(x) for x in re.findall(r"\d+(?:\.\d+)?[ \u00a0](?:ns|us|ms|s)\b", line)]
            if any(v < 1e6 for v in vals):
                fail(f"a slice under 1 ms labelled '1 ms or more': {line!r}")

# Names: none overflowing its box (CSS's ellipsis cuts the end).
names = probe["names"]
over = [n for n in names if n["overflow"]]
elided = [n for n in names if n.get("elided")]
print(f"names: {len(names)}, {len(elided)} cut in the middle, {len(over)} overflowing")
for n in over[:5]:
    fail(f"name overflows its box (cut at its end): {n['text'][:80]!r}")
for n in elided:
    head, _, tail = n["text"].rpartition("\u2026")
    if len(tail) < 4 or len(head) < 4:
        fail(f"name not cut in its middle: {n['text']!r}")
if len(elided) < int(env("NAMES_ELIDED", "0")):
    fail(f"{len(elided)} names cut in the middle, want {env('NAMES_ELIDED')} or more")

# Histograms: ticks even (linear) or increasing (log); labels in the plot.
logs = 0
for i, h in enumerate(probe["hists"]):
    ticks = [t for t in h["ticks"].split("|") if t]
    vals = [ns_of(t) for t in ticks]
    print(f"histogram {i}: {'log' if h['log'] else 'linear'} ticks {ticks}")
    if len(vals) < 2:
        fail(f"histogram {i}: {len(vals)} tick labels")
        continue
    if len(set(ticks)) != len(ticks) or any(b <= a for a, b in zip(vals, vals[1:])):
        fail(f"histogram {i}: tick labels repeat or go back: {ticks}")
    if h["log"]:
        logs += 1
    else:
        steps = [b - a for a, b in zip(vals, vals[1:])]
        if max(steps) - min(steps) > 1e-6 * max(abs(v) for v in vals):
            fail(f"histogram {i}: ticks unevenly spaced (too few digits): {ticks}")
    labels, plot, yaxis = h["labels"], h["plot"], h["y_axis"]
    if len(labels) != 2 or not plot:
        fail(f"histogram {i}: {len(labels)} median/mean labels found as text over the plot, want 2")
        continue
    for lab in labels:
        b = lab["box"]
        if b[0] < plot[0] - 1 or b[2] > plot[2] + 1:
            fail(f"histogram {i}: label {lab['text']!r} {b} leaves the plot area {plot}")
        if yaxis and b[0] < yaxis[2] and b[2] > yaxis[0] and b[1] < yaxis[3] and b[3] > yaxis[1]:
            fail(f"histogram {i}: label {lab['text']!r} {b} lies on the y axis' ticks {yaxis}")
    a, b = labels[0]["box"], labels[1]["box"]
    if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
        fail(f"histogram {i}: the median and mean labels overlap: {a} {b}")
if logs < int(env("LOG_X", "0")):
    fail(f"{logs} histograms on a log x axis, want {env('LOG_X')} or more")

# The step chart.
chart = element("steps-chart") or {}
bars = [attrs(b) for b in re.findall(r'<i class="step-bar"[^>]*>', dom)]
legend = probe["legend"]
for item in legend:
    if "1 ms or more" in item["label"]:
        fail(f"legend entry claims a size every slice does not have: {item['label']!r}")
if bars and not inject:  # (the injected data are not the trace's)
    durs = [int(b["data-dur-ns"]) for b in bars]
    busy = [int(b.get("data-cpu-busy-ns", "0")) for b in bars]
    ticks = chart.get("data-ticks", "").split("|")
    y_max = ns_of(ticks[-1]) if ticks and ticks[-1] else 0
    print(f"step chart: {len(bars)} bars, median {statistics.median(durs) / 1e3:.1f} us, "
          f"largest {max(durs) / 1e3:.1f} us, scale to {y_max / 1e3:.1f} us")
    if env("STEP_SCALE") == "1" and y_max > 1.5 * max(max(durs), max(busy)):
        fail(f"the step chart's scale ({ticks[-1]}) is set by something other than its bars "
             f"(largest {max(durs) / 1e3:.1f} us)")
    if env("STEP_DEVICE_MIN_US") and statistics.median(durs) < 1e3 * float(env("STEP_DEVICE_MIN_US")):
        fail(f"the median bar is {statistics.median(durs) / 1e3:.1f} us, want the device's time per step "
             f"({env('STEP_DEVICE_MIN_US')} us or more)")
    summary = element("steps-summary")
    if env("STEP_COMPUTE_MIN_PCT"):
        pct = float(summary.get("data-compute-pct", "-1")) if summary else -1
        print(f"overview: compute {pct}%")
        if pct < float(env("STEP_COMPUTE_MIN_PCT")):
            fail(f"no overview line giving compute {env('STEP_COMPUTE_MIN_PCT')}% or more (got {pct})")
    if env("BACKLOG") == "1":
        lags = [int(b["data-lag-ns"]) for b in bars]
        drawn = chart.get("data-backlog-drawn")
        print(f"backlog: drawn {drawn}, largest {chart.get('data-backlog-max-ns')} ns ({max(lags)} in the bars)")
        if drawn != str(len(bars)) or chart.get("data-backlog-max-ns") != str(max(lags)):
            fail("the launch backlog is not drawn as its own series over every step")
if env("NO_STEPS") == "1":
    want = ("No steps in this trace: mark iterations with ProfilerStep (prof.step()) or a repeated range "
            "(--step-range NAME).")
    got = re.search(r'<div id="steps-chart"[^>]*><p class="empty">([^<]*)</p>', dom)
    print(f"empty step chart: {got and html.unescape(got.group(1))!r}")
    if not got or html.unescape(got.group(1)) != want:
        fail(f"the empty step chart does not say {want!r}")

# One colour per part, the same in the legend and the bars (--inject: every
# part is in the legend).
if inject:
    idle = [i for i in legend if i["key"].startswith("idle") or i["label"].startswith("idle")]
    colours = [i["color"] for i in legend if i["color"] and "rgba(0, 0, 0, 0)" not in i["color"]]
    print(f"legend: {len(idle)} idle causes, {len(set(colours))} colours for {len(colours)} parts")
    if len(idle) < 14:
        fail(f"{len(idle)} idle causes in the legend, want every cause (14 or more)")
    if len(set(colours)) != len(colours):
        dup = sorted({c for c in colours if colours.count(c) > 1})
        fail(f"parts share a colour: {dup} ({[i['label'] for i in legend if i['color'] in dup]})")
    if "--colours" in sys.argv:
        with open(sys.argv[sys.argv.index("--colours") + 1], "w") as out:
            for c in colours:
                out.write(",".join(re.findall(r"\d+", c)[:3]) + "\n")

if env("COMPARE") == "1":
    lists = probe["lists"]
    print(f"compare lists: {lists}")
    if not lists:
        fail("no new / vanished lists on the compare page")
    for ls in lists:
        if ls["codes"] and ls["items"] < ls["codes"]:
            fail(f"names listed without items of their own: {ls}")
        if ls["min_gap"] is not None and ls["min_gap"] < 8:
            fail(f"two names {ls['min_gap']} px apart: they run together")

for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
