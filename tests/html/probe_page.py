#!/usr/bin/env python3
"""Writes a copy of tprof report's page with page_probe.js inserted right
after the page's data and before its own scripts (chromium_test.sh opens
the copy; the page itself is never changed):
   probe_page.py PAGE OUT"""
import os
import sys

page, out = sys.argv[1], sys.argv[2]
html = open(page, encoding="utf-8").read()
probe = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "page_probe.js"), encoding="utf-8").read()
mark = '<script type="application/json" id="report-data">'
at = html.find(mark)
if at < 0:
    sys.exit(f"{page}: no report data")
end = html.find("</script>", at) + len("</script>")
open(out, "w", encoding="utf-8").write(html[:end] + "\n<script>\n" + probe + "\n</script>" + html[end:])
