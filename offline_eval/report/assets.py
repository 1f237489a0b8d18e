"""Inline CSS and JavaScript for the HTML reports (kept as strings so the wheel needs no data files).

The pages must work from ``file://`` in an air-gapped browser: no fonts, images or scripts are
fetched, and the Content-Security-Policy below forbids the page from loading anything at all.
"""

from __future__ import annotations

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
       "img-src data:; base-uri 'none'; form-action 'none'")

# Runs first, in <head>: records any later script error in the page itself, so a headless
# browser's DOM dump (and a person) can see it.
ERROR_HOOK_JS = r"""
window.__oeErrors = [];
window.onerror = function (msg, src, line, col) {
  var text = String(msg) + (line ? ' (line ' + line + (col ? ':' + col : '') + ')' : '');
  window.__oeErrors.push(text);
  var box = document.getElementById('js-errors');
  if (box) {
    var p = document.createElement('p');
    p.textContent = 'Script error: ' + text;
    box.appendChild(p);
    box.hidden = false;
  }
  if (document.body) { document.body.setAttribute('data-js-error', '1'); }
  return false;
};
"""

CSS = r"""
:root { --fg:#1d232b; --muted:#5b6573; --line:#d9dee5; --bg:#f5f7fa; --card:#fff;
  --good:#1a7f37; --bad:#c62828; --warn:#8a5a00; --accent:#0b5cad; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { margin:0; background:var(--bg); color:var(--fg);
  font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","Noto Sans CJK SC","PingFang SC","Microsoft YaHei",Helvetica,Arial,sans-serif; }
header.top { background:#17212e; color:#fff; padding:18px 28px 14px; }
header.top h1 { margin:0 0 6px; font-size:20px; font-weight:600; }
header.top .meta { display:flex; flex-wrap:wrap; gap:4px 22px; color:#c6d0dc; font-size:13px; }
header.top .meta b { color:#fff; font-weight:600; }
main { padding:18px 28px 48px; max-width:1500px; margin:0 auto; }
section { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:14px 18px; margin:0 0 18px; }
section > h2 { font-size:16px; margin:0 0 10px; }
h3 { font-size:14px; margin:12px 0 6px; }
.banner { border-radius:8px; padding:12px 16px; margin:0 0 18px; font-weight:500; }
.banner.starter { background:#fff4d6; border:1px solid #e3b341; color:#5c3c00; }
.banner.error { background:#fde7e7; border:1px solid #e57373; color:#7f1d1d; }
.muted { color:var(--muted); }
.small { font-size:12px; }
table { border-collapse:collapse; width:100%; }
th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-weight:600; background:#eef1f5; white-space:nowrap; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
.summary td.metric { font-weight:600; }
.reasons { font-size:12px; color:var(--muted); }
.caveat { font-size:12px; color:var(--warn); text-align:left; max-width:320px; }
.reasons code { background:#f0f2f5; padding:0 4px; border-radius:3px; }
.pill { display:inline-block; min-width:46px; text-align:center; padding:1px 6px; border-radius:10px;
  font-variant-numeric:tabular-nums; font-size:12px; font-weight:600; }
.pill.na { background:#eceff3; color:#6b7480; font-weight:500; }
.grid { display:grid; grid-template-columns:repeat(auto-fill,minmax(360px,1fr)); gap:14px; }
.card { border:1px solid var(--line); border-radius:6px; padding:8px 10px; background:#fff; }
.card h3 { margin-top:2px; }
.card svg { max-width:100%; height:auto; display:block; }
ol.worst { margin:0; padding-left:22px; }
ol.worst li { margin:2px 0; }
ol.worst a { color:var(--accent); text-decoration:none; }
ol.worst a:hover { text-decoration:underline; }
.controls { display:flex; flex-wrap:wrap; gap:10px; align-items:center; margin:0 0 10px; }
.controls input[type=search] { min-width:280px; padding:5px 8px; border:1px solid #b9c2cd; border-radius:5px; font:inherit; }
.controls select, .controls button { padding:4px 8px; border:1px solid #b9c2cd; border-radius:5px; background:#fff; font:inherit; cursor:pointer; }
.controls button:hover { background:#eef1f5; }
#samples th.sortable { cursor:pointer; user-select:none; }
#samples th.sortable:hover { background:#e2e7ee; }
#samples th .arrow { color:var(--muted); font-size:11px; margin-left:3px; }
#samples th[aria-sort=ascending] .arrow::after { content:"▲"; }
#samples th[aria-sort=descending] .arrow::after { content:"▼"; }
#samples tr.srow { cursor:pointer; }
#samples tr.srow td:first-child { white-space:nowrap; }
#samples th.num { white-space:normal; min-width:72px; }
.table-wrap { overflow-x:auto; }
#samples tr.srow:hover td { background:#f3f7fc; }
#samples tr.srow td.q { max-width:380px; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }
#samples tr.srow .caret { display:inline-block; width:12px; color:var(--muted); transition:transform .1s; }
#samples tr.srow[aria-expanded=true] .caret { transform:rotate(90deg); }
#samples tbody.hit td { background:#fffbe6; }
tr.detail > td { background:#fafbfd; padding:12px 14px 16px; }
.cols { display:grid; grid-template-columns:minmax(0,1fr) minmax(0,1fr); gap:16px; }
@media (max-width: 900px) { .cols { grid-template-columns:1fr; } }
.field { margin:0 0 8px; }
.field .label { font-size:11px; text-transform:uppercase; letter-spacing:.04em; color:var(--muted); font-weight:600; }
.text { white-space:pre-wrap; word-break:break-word; }
ol.chunks { margin:0; padding-left:26px; }
ol.chunks li { margin:0 0 6px; }
.chunk { white-space:pre-wrap; word-break:break-word; max-height:9em; overflow:auto; background:#fff;
  border:1px solid var(--line); border-radius:4px; padding:4px 7px; }
.evidence { border:1px solid var(--line); border-radius:6px; background:#fff; padding:8px 10px; margin:10px 0 0; }
.evidence > .head { display:flex; gap:10px; align-items:baseline; flex-wrap:wrap; }
.evidence > .head .name { font-weight:600; }
.evidence .share-note { margin:4px 0; padding:3px 8px; border-left:3px solid #c9a227; background:#fffaeb; }
ul.items { list-style:none; margin:6px 0 0; padding:0; }
ul.items > li { border-left:4px solid #b9c2cd; padding:3px 8px; margin:0 0 5px; background:#fbfcfd; }
ul.items > li.ok { border-left-color:var(--good); background:#f1faf3; }
ul.items > li.no { border-left-color:var(--bad); background:#fdf2f2; }
ul.items > li.irr { border-left-color:#9aa4b1; background:#f5f6f8; }
.verdict { font-size:11px; font-weight:700; text-transform:uppercase; letter-spacing:.03em; margin-right:6px; }
li.ok .verdict { color:var(--good); } li.no .verdict { color:var(--bad); } li.irr .verdict { color:#5b6573; }
blockquote.support { margin:4px 0 2px 0; padding:3px 8px; border-left:3px solid #9cc3e6; background:#f3f8fd;
  white-space:pre-wrap; word-break:break-word; max-height:8em; overflow:auto; font-size:13px; }
.tfp { display:grid; grid-template-columns:repeat(3,minmax(0,1fr)); gap:10px; }
.tfp h4 { margin:4px 0; font-size:12px; }
pre.json { background:#f4f6f8; padding:6px 8px; border-radius:4px; overflow:auto; max-height:16em; font-size:12px; }
details > summary { cursor:pointer; }
.ci-bar { vertical-align:middle; }
.delta-neg { color:var(--bad); font-weight:600; } .delta-pos { color:var(--good); font-weight:600; }
.flag { font-size:11px; font-weight:700; padding:1px 6px; border-radius:8px; }
.flag.regressed { background:#fde2e2; color:#9b1c1c; } .flag.improved { background:#dcf5e3; color:#14532d; }
.flag.same { background:#eceff3; color:#4b5563; }
table.turns { margin:4px 0 0; }
table.turns td .text { max-height:7em; overflow:auto; }
table.turns td.worst { background:#fdf2f2; }
.worst-mark { font-size:10px; font-weight:700; text-transform:uppercase; color:var(--bad); margin-left:3px; }
#conversation-list tr.crow { cursor:pointer; }
#conversation-list tr.crow:hover td { background:#f3f7fc; }
#conversation-list tr.crow .caret { display:inline-block; width:12px; color:var(--muted); transition:transform .1s; }
#conversation-list tr.crow[aria-expanded=true] .caret { transform:rotate(90deg); }
#conversation-list tbody.hit td { background:#fffbe6; }
ol.turns { list-style:none; margin:4px 0 0; padding:0; max-height:22em; overflow:auto; }
ol.turns > li { border-left:4px solid #b9c2cd; padding:3px 8px; margin:0 0 5px; background:#fbfcfd; }
ol.turns > li.user { border-left-color:var(--accent); background:#f3f8fd; }
ol.turns > li .role { font-size:11px; font-weight:700; text-transform:uppercase; color:var(--muted); }
ol.turns > li .text { max-height:9em; overflow:auto; }
footer { color:var(--muted); font-size:12px; text-align:center; padding:0 0 24px; }
@media print { .controls { display:none; } tr.detail[hidden] { display:none; } }
"""

# The expandable tables' shared step (the samples' and the conversations', whose script follows the
# samples' on a page): open the <tbody> the URL's #id names when it belongs to `table`, mark it and
# scroll to it.
HASH_OPEN_JS = r"""
function openBodyFromHash(table, bodies, setOpen) {
  var h = decodeURIComponent((location.hash || '').slice(1));
  var tb = h ? document.getElementById(h) : null;
  if (!tb || tb.parentNode !== table || tb.tagName !== 'TBODY') { return; }
  tb.hidden = false;
  setOpen(tb, true);
  bodies.forEach(function (b) { b.classList.remove('hit'); });
  tb.classList.add('hit');
  tb.scrollIntoView({block: 'start'});
}
"""

# The per-sample table: sorting, filtering, expanding rows, and URL-driven state
# (?q=text&lang=xx&status=unscored&sort=key&dir=asc|desc) so a view can be linked or tested.
TABLE_JS = HASH_OPEN_JS + r"""
(function () {
  'use strict';
  var table = document.getElementById('samples');
  if (!table) { return; }
  var bodies = Array.prototype.slice.call(table.tBodies);
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var search = document.getElementById('f-text');
  var lang = document.getElementById('f-lang');
  var status = document.getElementById('f-status');
  var shown = document.getElementById('shown-count');
  var sortKey = null, sortDir = 1;

  function keyValue(tb, key, numeric) {
    var raw = tb.getAttribute('data-k-' + key);
    if (raw === null || raw === '') { return null; }
    if (numeric) { var n = parseFloat(raw); return isNaN(n) ? null : n; }
    return raw.toLowerCase();
  }

  function applySort(key, dir) {
    // A plain lookup, never a selector built from the URL (?sort=%22]x must not throw).
    var th = heads.filter(function (h) { return h.getAttribute('data-key') === key; })[0];
    if (!th) { return; }
    var numeric = th.getAttribute('data-type') === 'num';
    sortKey = key; sortDir = dir;
    heads.forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
    var decorated = bodies.map(function (tb, i) { return [keyValue(tb, key, numeric), i, tb]; });
    decorated.sort(function (a, b) {
      if (a[0] === null && b[0] === null) { return a[1] - b[1]; }
      if (a[0] === null) { return 1; }      // missing values always last
      if (b[0] === null) { return -1; }
      if (a[0] < b[0]) { return -dir; }
      if (a[0] > b[0]) { return dir; }
      return a[1] - b[1];
    });
    bodies = decorated.map(function (d) { return d[2]; });
    bodies.forEach(function (tb) { table.appendChild(tb); });
  }

  function applyFilter() {
    var q = (search && search.value || '').trim().toLowerCase();
    var l = lang ? lang.value : '';
    var s = status ? status.value : '';
    var n = 0;
    bodies.forEach(function (tb) {
      var ok = true;
      if (q && (tb.getAttribute('data-search') || '').indexOf(q) < 0) { ok = false; }
      if (ok && l && tb.getAttribute('data-lang') !== l) { ok = false; }
      if (ok && s) {
        var un = ' ' + (tb.getAttribute('data-unscored') || '') + ' ';
        if (s === '*') { ok = un.trim() !== ''; } else { ok = un.indexOf(' ' + s + ' ') >= 0; }
      }
      tb.hidden = !ok;
      if (ok) { n += 1; }
    });
    if (shown) { shown.textContent = String(n); }
  }

  function setOpen(tb, open) {
    var row = tb.rows[0], detail = tb.rows[1];
    if (!detail) { return; }
    detail.hidden = !open;
    row.setAttribute('aria-expanded', open ? 'true' : 'false');
  }

  heads.forEach(function (th) {
    if (!th.classList.contains('sortable')) { return; }
    th.addEventListener('click', function () {
      var key = th.getAttribute('data-key');
      var first = th.getAttribute('data-type') === 'num' ? 1 : 1;
      applySort(key, sortKey === key ? -sortDir : first);
    });
  });
  bodies.forEach(function (tb) {
    tb.rows[0].addEventListener('click', function (ev) {
      if (ev.target && ev.target.closest && ev.target.closest('a')) { return; }
      setOpen(tb, tb.rows[1].hidden);
    });
  });
  if (search) { search.addEventListener('input', applyFilter); }
  if (lang) { lang.addEventListener('change', applyFilter); }
  if (status) { status.addEventListener('change', applyFilter); }
  var expand = document.getElementById('expand-all');
  var collapse = document.getElementById('collapse-all');
  if (expand) { expand.addEventListener('click', function () { bodies.forEach(function (tb) { if (!tb.hidden) { setOpen(tb, true); } }); }); }
  if (collapse) { collapse.addEventListener('click', function () { bodies.forEach(function (tb) { setOpen(tb, false); }); }); }

  function openFromHash() { openBodyFromHash(table, bodies, setOpen); }  // a sample's, not a conversation's
  window.addEventListener('hashchange', openFromHash);

  var params = new URLSearchParams(location.search);
  if (params.get('q') && search) { search.value = params.get('q'); }
  if (params.get('lang') && lang) { lang.value = params.get('lang'); }
  if (params.get('status') && status) { status.value = params.get('status'); }
  if (params.get('sort')) { applySort(params.get('sort'), params.get('dir') === 'desc' ? -1 : 1); }
  if (params.get('open') === 'all') { bodies.forEach(function (tb) { setOpen(tb, true); }); }
  applyFilter();
  openFromHash();
})();
"""

# Generic sortable tables (comparison and retrieval pages): any <table class="sortable-table">.
SIMPLE_SORT_JS = r"""
(function () {
  'use strict';
  Array.prototype.slice.call(document.querySelectorAll('table.sortable-table')).forEach(function (table) {
    var body = table.tBodies[0];
    if (!body || !table.tHead) { return; }
    var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var state = {col: -1, dir: 1};
    heads.forEach(function (th, col) {
      th.classList.add('sortable');
      th.addEventListener('click', function () {
        state.dir = state.col === col ? -state.dir : 1; state.col = col;
        heads.forEach(function (h) { h.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', state.dir > 0 ? 'ascending' : 'descending');
        var rows = Array.prototype.slice.call(body.rows).map(function (r, i) {
          var cell = r.cells[col], raw = cell ? (cell.getAttribute('data-v') || cell.textContent) : '';
          var n = parseFloat(raw);
          return [isNaN(n) || !/^\s*[-+]?[0-9.]/.test(raw) ? raw.toLowerCase() : n, i, r];
        });
        rows.sort(function (a, b) {
          var x = a[0], y = b[0];
          if (typeof x !== typeof y) { return typeof x === 'number' ? -1 : 1; }
          if (x < y) { return -state.dir; } if (x > y) { return state.dir; } return a[1] - b[1];
        });
        rows.forEach(function (r) { body.appendChild(r[2]); });
      });
    });
  });
})();
"""

# The Conversations section: the worst conversations first (or by another order), a filter, only the first
# hundred rows until asked for all, a row opening into its turns, and #c-<n> opening one conversation.
CONVERSATIONS_JS = r"""
(function () {
  'use strict';
  var table = document.getElementById('conversation-list');
  if (!table) { return; }
  var bodies = Array.prototype.slice.call(table.tBodies);
  var search = document.getElementById('c-text');
  var order = document.getElementById('c-order');
  var more = document.getElementById('c-more');
  var shown = document.getElementById('c-shown');
  var limit = 100;

  function key(tb, name) {
    var raw = tb.getAttribute(name === 'pos' ? 'data-pos' : 'data-g-' + name);
    if (raw === null || raw === '') { return null; }
    var n = parseFloat(raw);
    return isNaN(n) ? null : n;
  }

  function applyOrder() {
    var name = order ? order.value : 'pos';
    var decorated = bodies.map(function (tb) { return [key(tb, name), key(tb, 'pos'), tb]; });
    decorated.sort(function (a, b) {
      if (a[0] === null && b[0] === null) { return a[1] - b[1]; }
      if (a[0] === null) { return 1; }      // unscored last
      if (b[0] === null) { return -1; }
      return a[0] - b[0] || a[1] - b[1];    // the worst (smallest goodness) first
    });
    bodies = decorated.map(function (d) { return d[2]; });
    bodies.forEach(function (tb) { table.appendChild(tb); });
  }

  function applyFilter() {
    var q = (search && search.value || '').trim().toLowerCase();
    var matching = 0, visible = 0;
    bodies.forEach(function (tb) {
      var ok = !q || (tb.getAttribute('data-search') || '').indexOf(q) >= 0;
      if (ok) { matching += 1; }
      tb.hidden = !ok || matching > limit;
      if (!tb.hidden) { visible += 1; }
    });
    if (shown) { shown.textContent = String(visible); }
    if (more) { more.hidden = matching <= limit; more.textContent = 'show all ' + matching; }
  }

  function setOpen(tb, open) {
    tb.rows[1].hidden = !open;
    tb.rows[0].setAttribute('aria-expanded', open ? 'true' : 'false');
  }

  bodies.forEach(function (tb) {
    tb.rows[0].addEventListener('click', function () { setOpen(tb, tb.rows[1].hidden); });
  });
  if (search) { search.addEventListener('input', applyFilter); }
  if (order) { order.addEventListener('change', function () { applyOrder(); applyFilter(); }); }
  if (more) { more.addEventListener('click', function () { limit = Infinity; applyFilter(); }); }

  function openFromHash() { openBodyFromHash(table, bodies, setOpen); }
  window.addEventListener('hashchange', openFromHash);

  var params = new URLSearchParams(location.search);
  if (params.get('cq') && search) { search.value = params.get('cq'); }
  if (params.get('corder') && order) { order.value = params.get('corder'); }
  if (params.get('copen') === 'all') { bodies.forEach(function (tb) { setOpen(tb, true); }); }
  applyOrder();
  applyFilter();
  openFromHash();
})();
"""

READY_JS = r"""
document.body.setAttribute('data-ready', '1');
"""
