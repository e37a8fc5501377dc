// Zoom and pan on the timeline's time axis, and the links between violations and their
// markers. The view is [x0, x0 + W/k] in unzoomed plot pixels; bars scale with it, markers
// and text are moved to their moment. `#t=A-B` (seconds) opens the page on that stretch,
// `#v-N` on violation N.
(function () {
  var tl = document.getElementById('timeline');
  if (!tl) return;
  var END = +tl.dataset.endUs, W = +tl.dataset.plotW, L = +tl.dataset.labelW;
  var K_MAX = Math.max(1, END / (W * 100)); // at most 100 us per pixel
  var x0 = 0, k = 1;
  var NS = 'http://www.w3.org/2000/svg';
  function fmt(us, step) {
    var d = step >= 1e6 ? 0 : step >= 1e5 ? 1 : step >= 1e4 ? 2 : step >= 1e3 ? 3 : 4;
    return (us / 1e6).toFixed(d) + ' s';
  }
  function ticks(a, b) {
    var g = document.getElementById('ticks');
    while (g.firstChild) g.removeChild(g.firstChild);
    var span = b - a, step = 1;
    while (step * 10 <= span / 8) step *= 10;
    if (step * 5 <= span / 8) step *= 5; else if (step * 2 <= span / 8) step *= 2;
    for (var t = Math.ceil(a / step) * step; t <= b; t += step) {
      var x = L + (t * W / END - x0) * k;
      var line = document.createElementNS(NS, 'line');
      line.setAttribute('x1', x); line.setAttribute('x2', x);
      line.setAttribute('y1', 14); line.setAttribute('y2', 20);
      var text = document.createElementNS(NS, 'text');
      text.setAttribute('x', x); text.setAttribute('y', 11);
      text.setAttribute('text-anchor', 'middle');
      text.textContent = fmt(t, step);
      g.appendChild(line); g.appendChild(text);
    }
  }
  function render() {
    k = Math.min(Math.max(k, 1), K_MAX);
    x0 = Math.min(Math.max(x0, 0), W - W / k);
    var scale = 'translate(' + (-x0 * k).toFixed(2) + ',0) scale(' + k.toFixed(5) + ',1)';
    tl.querySelectorAll('g.zoom').forEach(function (g) { g.setAttribute('transform', scale); });
    tl.querySelectorAll('.pin').forEach(function (p) {
      p.setAttribute('transform', 'translate(' + ((+p.dataset.x - x0) * k).toFixed(2) + ',0)');
    });
    var a = Math.round(x0 * END / W), b = Math.round((x0 + W / k) * END / W);
    tl.dataset.view = a + '-' + b;
    ticks(a, b);
    document.getElementById('zoom-view').textContent = fmt(a, b - a) + ' – ' + fmt(b, b - a);
  }
  function zoomAt(factor, px) {
    var base = x0 + px / k;
    k *= factor;
    k = Math.min(Math.max(k, 1), K_MAX);
    x0 = base - px / k;
    render();
  }
  function show(aUs, bUs) {
    aUs = Math.max(0, aUs); bUs = Math.min(END, bUs);
    if (bUs <= aUs) return;
    k = END / (bUs - aUs);
    x0 = aUs * W / END;
    render();
  }
  function focusViolation(id) {
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
    if (/^v-[0-9]+$/.test(h)) focusViolation(h);
  }
  function plotX(e) {
    return e.clientX - document.getElementById('axis').getBoundingClientRect().left - L;
  }
  document.getElementById('zoom-in').onclick = function () { zoomAt(2, W / 2); };
  document.getElementById('zoom-out').onclick = function () { zoomAt(0.5, W / 2); };
  document.getElementById('pan-left').onclick = function () { x0 -= W / k / 4; render(); };
  document.getElementById('pan-right').onclick = function () { x0 += W / k / 4; render(); };
  document.getElementById('zoom-reset').onclick = function () { k = 1; x0 = 0; render(); };
  tl.addEventListener('wheel', function (e) {
    var onAxis = e.target.closest && e.target.closest('#axis');
    if (!onAxis && !e.ctrlKey) return;
    e.preventDefault();
    zoomAt(e.deltaY < 0 ? 1.25 : 0.8, Math.min(Math.max(plotX(e), 0), W));
  }, { passive: false });
  var drag = null;
  tl.addEventListener('pointerdown', function (e) {
    if (e.target.closest('.violation-mark')) return;
    drag = { x: e.clientX, x0: x0 };
  });
  window.addEventListener('pointermove', function (e) {
    if (!drag || Math.abs(e.clientX - drag.x) < 3) return;
    x0 = drag.x0 - (e.clientX - drag.x) / k;
    render();
  });
  window.addEventListener('pointerup', function () { drag = null; });
  tl.addEventListener('click', function (e) {
    var mark = e.target.closest('.violation-mark');
    if (mark) location.hash = 'vr-' + mark.id.slice(2);
  });
  window.addEventListener('hashchange', fromHash);
  render();
  fromHash();
})();
