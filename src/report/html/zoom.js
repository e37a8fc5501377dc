// Zoom and pan on the timeline's time axis, and the links between violations, faults and
// their markers. The view is [x0, x0 + W/k] in unzoomed plot units; the plot is drawn F
// pixels per unit so it fits its box (F at most 1). Bars scale with the view, markers and
// text are moved to their moment, and each stretch of the goodput strip shows the longest
// label that fits inside it. `#t=A-B` (seconds) opens the page on that stretch, `#v-N` on
// violation N, `#f-N` on fault N.
(function () {
  var tl = document.getElementById('timeline');
  if (!tl) return;
  var END = +tl.dataset.endUs, W = +tl.dataset.plotW, L = +tl.dataset.labelW;
  var K_MAX = Math.max(1, END / (W * 20)); // at most 20 us per unit
  var x0 = 0, k = 1, F = 1;
  var NS = 'http://www.w3.org/2000/svg';
  var UNITS = [[3600e6, ' h'], [60e6, ' min'], [1e6, ' s'], [1e3, ' ms']];
  // The unit a view of `span` us is written in: hours past 3 h, minutes past 10 min.
  function unitOf(span) {
    return span >= 3 * 3600e6 ? UNITS[0] : span >= 600e6 ? UNITS[1] : span >= 2e3 ? UNITS[2] : UNITS[3];
  }
  function fmt(us, step, unit) {
    var v = step / unit[0], d = v >= 1 ? 0 : v >= 0.1 ? 1 : v >= 0.01 ? 2 : 3;
    return (us / unit[0]).toFixed(d) + unit[1];
  }
  function px(unitX) { return (unitX - x0) * k * F; }
  function ticks(a, b) {
    var g = document.getElementById('ticks');
    while (g.firstChild) g.removeChild(g.firstChild);
    var span = b - a, unit = unitOf(span), want = span / Math.max(4, W * F / 140);
    var step = unit[0] / 1000;
    while (step * 10 <= want) step *= 10;
    if (step * 5 <= want) step *= 5; else if (step * 2 <= want) step *= 2;
    for (var t = Math.ceil(a / step) * step; t <= b; t += step) {
      var x = L + px(t * W / END);
      var line = document.createElementNS(NS, 'line');
      line.setAttribute('x1', x); line.setAttribute('x2', x);
      line.setAttribute('y1', 14); line.setAttribute('y2', 20);
      var text = document.createElementNS(NS, 'text');
      text.setAttribute('x', x); text.setAttribute('y', 11);
      text.setAttribute('text-anchor', 'middle');
      text.textContent = fmt(t, step, unit);
      g.appendChild(line); g.appendChild(text);
    }
  }
  var widths = {};
  function textWidth(probe, s) {
    if (!(s in widths)) { probe.textContent = s; widths[s] = probe.getComputedTextLength(); }
    return widths[s];
  }
  // Each goodput label: the longest form that fits inside its stretch's visible part.
  function fitLabels() {
    var labels = tl.querySelectorAll('.gp-label');
    if (!labels.length) return;
    var probe = labels[0].querySelector('text'), keep = probe.textContent;
    var fits = [];
    labels.forEach(function (g) {
      var a = Math.max(px(+g.dataset.x), 0), b = Math.min(px(+g.dataset.xEnd), W * F);
      var room = b - a - 4, forms = g.dataset.forms.split('|'), chosen = null;
      for (var i = 0; i < forms.length && chosen === null; i++) {
        if (textWidth(probe, forms[i]) <= room) chosen = forms[i];
      }
      fits.push([g, a, chosen]);
    });
    probe.textContent = keep;
    fits.forEach(function (f) {
      var g = f[0];
      g.style.display = f[2] === null ? 'none' : '';
      if (f[2] !== null) g.querySelector('text').textContent = f[2];
      g.setAttribute('transform', 'translate(' + f[1].toFixed(2) + ',0)');
    });
  }
  function fitWidth() {
    var room = tl.clientWidth - L - 16;
    F = Math.min(1, Math.max(0.3, room / W));
    tl.querySelectorAll('svg.row, #axis').forEach(function (s) { s.setAttribute('width', L + W * F + 10); });
    tl.querySelectorAll('svg.plot').forEach(function (s) { s.setAttribute('width', W * F); });
  }
  function render() {
    k = Math.min(Math.max(k, 1), K_MAX);
    x0 = Math.min(Math.max(x0, 0), W - W / k);
    var scale = 'translate(' + (-x0 * k * F).toFixed(2) + ',0) scale(' + (k * F).toFixed(5) + ',1)';
    tl.querySelectorAll('g.zoom').forEach(function (g) { g.setAttribute('transform', scale); });
    tl.querySelectorAll('.pin:not(.gp-label)').forEach(function (p) {
      var t = 'translate(' + px(+p.dataset.x).toFixed(2) + ',0)';
      // Notes were laid out for the full width: on a narrower plot they shrink with it,
      // from the lanes' bottom, so each still fits where it was placed.
      if (F < 1 && p.dataset.top) {
        t = 'translate(' + px(+p.dataset.x).toFixed(2) + ',' + (+p.dataset.top * (1 - F)).toFixed(2) + ') scale(' + F.toFixed(4) + ')';
      }
      p.setAttribute('transform', t);
    });
    fitLabels();
    var a = Math.round(x0 * END / W), b = Math.round((x0 + W / k) * END / W);
    tl.dataset.view = a + '-' + b;
    ticks(a, b);
    var unit = unitOf(b - a);
    document.getElementById('zoom-view').textContent = fmt(a, (b - a) / 10, unit) + ' – ' + fmt(b, (b - a) / 10, unit);
  }
  function zoomAt(factor, at) {
    var base = x0 + at / (k * F);
    k *= factor;
    k = Math.min(Math.max(k, 1), K_MAX);
    x0 = base - at / (k * F);
    render();
  }
  function show(aUs, bUs) {
    aUs = Math.max(0, aUs); bUs = Math.min(END, bUs);
    if (bUs <= aUs) return;
    k = END / (bUs - aUs);
    x0 = aUs * W / END;
    render();
  }
  // Centres a pinned marker (a violation, a fault) and opens and scrolls to its row.
  function focusPin(id) {
    var el = document.getElementById(id);
    if (!el) return;
    var at = +el.dataset.at, half = Math.max(END / 40, 1e6);
    show(at - half, at + half);
    tl.querySelectorAll('.focus').forEach(function (f) { f.classList.remove('focus'); });
    el.classList.add('focus');
    var group = el.closest('details');
    if (group) group.open = true;
    var row = el.closest('svg.row');
    if (row && row.scrollIntoView) row.scrollIntoView({ block: 'center' });
  }
  function fromHash() {
    var h = decodeURIComponent(location.hash.slice(1));
    var m = h.match(/^t=([0-9.]+)-([0-9.]+)$/);
    if (m) { show(m[1] * 1e6, m[2] * 1e6); return; }
    if (/^[vf]-[0-9]+$/.test(h)) focusPin(h);
  }
  function plotX(e) {
    return e.clientX - document.getElementById('axis').getBoundingClientRect().left - L;
  }
  document.getElementById('zoom-in').onclick = function () { zoomAt(2, W * F / 2); };
  document.getElementById('zoom-out').onclick = function () { zoomAt(0.5, W * F / 2); };
  document.getElementById('pan-left').onclick = function () { x0 -= W / k / 4; render(); };
  document.getElementById('pan-right').onclick = function () { x0 += W / k / 4; render(); };
  document.getElementById('zoom-reset').onclick = function () { k = 1; x0 = 0; render(); };
  tl.addEventListener('wheel', function (e) {
    var onAxis = e.target.closest && e.target.closest('#axis, #goodput-strip');
    if (!onAxis && !e.ctrlKey) return;
    e.preventDefault();
    zoomAt(e.deltaY < 0 ? 1.25 : 0.8, Math.min(Math.max(plotX(e), 0), W * F));
  }, { passive: false });
  var drag = null;
  tl.addEventListener('pointerdown', function (e) {
    if (e.target.closest('.violation-mark')) return;
    drag = { x: e.clientX, x0: x0 };
  });
  window.addEventListener('pointermove', function (e) {
    if (!drag || Math.abs(e.clientX - drag.x) < 3) return;
    x0 = drag.x0 - (e.clientX - drag.x) / (k * F);
    render();
  });
  window.addEventListener('pointerup', function () { drag = null; });
  tl.addEventListener('click', function (e) {
    var mark = e.target.closest('.violation-mark');
    if (mark) location.hash = 'vr-' + mark.id.slice(2);
  });
  window.addEventListener('hashchange', fromHash);
  window.addEventListener('resize', function () { fitWidth(); render(); });
  // For people's consoles and the browser test: show a stretch given in microseconds.
  window.trainsimTimeline = { show: show, render: render };
  fitWidth();
  render();
  fromHash();
})();
