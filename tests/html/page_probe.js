// Inserted by chromium_test.sh into a copy of tprof report's page, right
// after its data (<script id="report-data">) and before its own script, so
// that the test can look at what a reader sees and --dump-dom cannot show:
// where tooltips wrap, whether names overflow their boxes, how the
// compare page's name lists are laid out. It never changes the page's
// drawing code; the results go, as JSON, into a hidden pre element #probe-result.
// Options in the URL's hash (#a=1&b=2):
//   inject=idle   rewrite the data first: every step holds every part of
//                 the device split (each idle cause), the first one 6.9 us
//                 of "host work" idle, so the legend and the bars show them all
//   focus=ID      hide everything but #ID, moved to the top of the page: a
//                 screenshot of that part alone
(function () {
  'use strict';
  var params = {};
  location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
    if (!kv) return;
    var p = kv.split('=');
    params[p[0]] = decodeURIComponent(p[1] || '1');
  });

  if (params.inject === 'idle') {
    var node = document.getElementById('report-data'), d = JSON.parse(node.textContent), keys = d.step_parts.keys;
    d.steps.forEach(function (s, i) {
      var sum = 0;
      s.parts = keys.map(function (k) {
        var v = (i === 0 && k === 'idle_host_work') ? 6900 : 12000;
        sum += v;
        return v;
      });
      s.dur_ns = sum;
      if ('time_ns' in s) s.time_ns = sum;
      if ('host_ns' in s) s.host_ns = sum;
      s.cpu_busy_ns = Math.min(s.cpu_busy_ns, sum);
      s.cpu_any_busy_ns = Math.min(s.cpu_any_busy_ns, sum);
    });
    node.textContent = JSON.stringify(d);
  }

  // A number with its unit, as the page prints durations, sizes and shares.
  var NUMBER = /\d+(?:\.\d+)?(?:[ \u00a0](?:ns|us|ms|s|KiB|MiB|GiB|B)\b)?%?/g;

  // The tip shown in `box` after a mousemove at (x, y) on `cv`: its lines,
  // the numbers split across lines, whether it stays inside its box.
  function hover(cv, x, y) {
    var b = cv.getBoundingClientRect(), box = cv.parentNode;
    cv.dispatchEvent(new MouseEvent('mousemove', { clientX: b.left + x, clientY: b.top + y, bubbles: true }));
    var tip = null;
    Array.prototype.forEach.call(box.querySelectorAll('.tip'), function (t) { if (t.style.display !== 'none' && t.offsetWidth > 0) tip = t; });
    if (!tip) return null;
    var broken = [], walker = document.createTreeWalker(tip, NodeFilter.SHOW_TEXT), n;
    while ((n = walker.nextNode())) {
      var m;
      NUMBER.lastIndex = 0;
      while ((m = NUMBER.exec(n.data))) {
        var r = document.createRange();
        r.setStart(n, m.index);
        r.setEnd(n, m.index + m[0].length);
        var tops = [];
        Array.prototype.forEach.call(r.getClientRects(), function (q) { if (q.width > 0) tops.push(Math.round(q.top)); });
        if (tops.length && Math.max.apply(null, tops) - Math.min.apply(null, tops) > 2) broken.push(m[0]);
      }
    }
    var tr = tip.getBoundingClientRect(), br = box.getBoundingClientRect();
    var out = { box: box.id, x: Math.round(x), text: tip.innerText, broken: broken,
                inside: tr.left >= br.left - 1 && tr.right <= br.right + 1 && tr.right <= window.innerWidth };
    cv.dispatchEvent(new MouseEvent('mouseleave', { bubbles: true }));
    return out;
  }

  function run() {
    var out = { tips: [], names: [], legend: [], lists: [], hists: [] };
    // Tooltips at the left and right ends of every chart drawn on a canvas.
    [['steps-chart', 0.5], ['critical-chart', 0.5], ['timeline', -1], ['flame', -1]].forEach(function (spec) {
      var box = document.getElementById(spec[0]);
      if (!box) return;
      var cv = box.querySelector('canvas');
      if (!cv) return;
      var w = cv.clientWidth, h = cv.clientHeight;
      var ys = spec[1] > 0 ? [h * 0.6, h * 0.9] : spec[0] === 'timeline' ? [32, 48, 64] : [6, 24];
      [75, w * 0.5, w - 14].forEach(function (x) {
        ys.forEach(function (y) { var t = hover(cv, x, y); if (t) out.tips.push(t); });
      });
    });
    // Names that may be long (kernels, ops): whether each fits its box.
    Array.prototype.forEach.call(document.querySelectorAll('.kernel-hist h3, div.name, span.name, dl.changes code'), function (e) {
      out.names.push({ text: e.textContent, title: e.title || '', overflow: e.scrollWidth > e.clientWidth + 1, elided: e.dataset.elided === '1' });
    });
    // The step chart's legend as drawn: label and colour.
    var steps = document.getElementById('steps-chart');
    if (steps) {
      Array.prototype.forEach.call(steps.querySelectorAll('ul.legend li'), function (li) {
        var sw = li.querySelector('.swatch');
        out.legend.push({ key: li.dataset.key || '', label: li.textContent, color: sw ? getComputedStyle(sw).backgroundColor : '' });
      });
    }
    // The compare page's new / vanished lists: items and the room between them.
    Array.prototype.forEach.call(document.querySelectorAll('dl.changes dd'), function (dd) {
      var codes = dd.querySelectorAll('code'), gaps = [];
      for (var i = 1; i < codes.length; i++) {
        var a = codes[i - 1].getBoundingClientRect(), b = codes[i].getBoundingClientRect();
        if (Math.abs(a.top - b.top) < 2) gaps.push(Math.round(b.left - a.right));
      }
      out.lists.push({ items: dd.querySelectorAll('li').length, codes: codes.length, min_gap: gaps.length ? Math.min.apply(null, gaps) : null });
    });
    // The histograms: their x ticks and scale; where their median and mean
    // labels lie against the plot area (uPlot's .u-over) and the y axis.
    function box(e) { var r = e.getBoundingClientRect(); return [Math.round(r.left), Math.round(r.top), Math.round(r.right), Math.round(r.bottom)]; }
    Array.prototype.forEach.call(document.querySelectorAll('.kernel-hist'), function (card) {
      var plot = card.querySelector('[data-ticks]'), over = card.querySelector('.u-over'), axes = card.querySelectorAll('.u-axis');
      out.hists.push({ ticks: plot ? plot.dataset.ticks : '', log: card.dataset.logX || '',
                       labels: Array.prototype.map.call(card.querySelectorAll('.hist-label'), function (e) { return { text: e.textContent, box: box(e) }; }),
                       plot: over ? box(over) : null, y_axis: axes.length > 1 ? box(axes[1]) : null });
    });
    var pre = document.createElement('pre');
    pre.id = 'probe-result';
    pre.hidden = true;
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
    if (params.focus) {
      // The part alone, first in the body (a headless screenshot shows the
      // top of the page, whatever the scroll).
      var target = document.getElementById(params.focus);
      if (target) {
        Array.prototype.forEach.call(document.body.children, function (e) { if (e.tagName !== 'SCRIPT') e.style.display = 'none'; });
        document.body.insertBefore(target, document.body.firstChild);
      }
    }
    document.body.dataset.probed = '1';
  }
  window.addEventListener('load', function () { setTimeout(run, 0); });
})();
