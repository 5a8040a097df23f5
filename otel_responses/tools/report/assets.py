"""The page's one style sheet and one script, inlined into every report and allowed by their hashes alone.

The script only filters: every fact is in the HTML, so the page reads the same without it. Filter state lives in
the URL fragment (``#signal=unstored_parent&severity=error``; a comma separates alternatives), so a link reproduces
a view. When done it sets ``data-ready`` on the root element (``data-error`` if it failed) and
``data-render-ms``, the time from navigation start to the page parsed, filtered and laid out.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Final

CSS: Final = r"""
:root{--err:#b3261e;--warn:#8a5a00;--info:#0b57d0;--ok:#1e7b34;--muted:#5f6368;--line:#dadce0;--chip:#eef0f2}
*{box-sizing:border-box}
body{margin:0;font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:#202124;background:#f6f7f9}
header,main,footer{padding:10px 20px}
header{background:#fff;border-bottom:1px solid var(--line)}
footer{color:var(--muted);font-size:12px}
h1{font-size:19px;margin:2px 0 4px}
h2{font-size:15px;margin:0 0 4px}
a{color:#0b57d0}
small{color:var(--muted);font-size:11px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12px}
.meta{color:var(--muted);margin:2px 0}
details.help{margin:6px 0;color:#3c4043}
details.help dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}
details.help dt{font-weight:600}
details.help dd{margin:0}
#filters{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;margin:8px 0 2px}
#filters label{font-weight:600;color:#3c4043}
#filters select{font:inherit;margin-left:4px;max-width:22em}
#shown{color:var(--muted)}
#problems li{color:var(--err)}
section{margin:12px 0}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid var(--line);padding:3px 6px;text-align:left;vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:12px;background:#f1f3f4}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td.z{color:#b0b4b8}
#summary table{border:1px solid var(--line);border-top:none;table-layout:fixed}
#summary .chunk:first-of-type table{border-top:1px solid var(--line)}
#summary .chunk{content-visibility:auto;contain-intrinsic-size:auto 2400px}
#summary :is(th,td):nth-child(1){width:28%}
#summary :is(th,td):nth-child(2){width:11%}
#summary :is(th,td):nth-child(3){width:9%}
#summary :is(th,td):is(:nth-child(4),:nth-child(5),:nth-child(6)){width:4.5%}
#summary :is(th,td):is(:nth-child(7),:nth-child(8),:nth-child(9)){width:6%}
#summary :is(th,td):nth-child(11){width:6%}
#summary td{overflow-wrap:anywhere}
/* One conversation; offscreen ones are neither laid out nor painted until scrolled to. */
.conv{padding:10px 12px;background:#fff;border:1px solid var(--line);border-left:5px solid var(--ok);border-radius:6px;
content-visibility:auto;contain-intrinsic-size:auto 420px}
.conv.se{border-left-color:var(--err)}
.conv.sw{border-left-color:#d39b00}
.conv.si{border-left-color:var(--info)}
/* The timeline: one tbody per call (main row, ids row, signals row), a striped tbody per gap. */
.tl{margin-top:6px;table-layout:fixed}
.tl th:nth-child(1){width:50px}
.tl th:nth-child(2){width:104px}
.tl th:nth-child(3){width:14%}
.tl th:nth-child(4){width:11%}
.tl th:nth-child(5){width:12%}
.tl th:nth-child(6){width:21%}
.tl th:nth-child(7){width:10%}
.tl th:nth-child(8){width:11%}
.tl td{overflow-wrap:anywhere}
.tl tr.main>td{border-bottom:none;padding-top:6px}
.tl tbody.loss>tr>td{background:#fff7f6}
.tl tbody.loss>tr.main>td.turn{box-shadow:inset 3px 0 0 var(--err)}
.tl tr.ids>td{color:var(--muted);font:11px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;
border-bottom:none;padding-top:0;padding-bottom:2px}
.tl td.t,.c.m{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
.tl td.t{font-size:11px}
.tl td.t small{display:block}
.tl tr.sigs>td{padding-top:0}
.tl td.turn{font-weight:700;font-size:14px}
.tl td.turn small{display:block;font-weight:400}
.tl tbody.gap td{color:var(--warn);font-style:italic;
background:repeating-linear-gradient(135deg,#fffaf0 0 8px,#fff3dc 8px 16px)}
.err{color:var(--err);font-weight:600}
/* Chips: .c, coloured by severity (se sw si su), state (ok off), item type (tm tr tc to tk tx tn), hash (h0-h11). */
.c{display:inline-block;padding:0 6px;margin:1px 3px 1px 0;border-radius:9px;background:var(--chip);font-size:11px;
line-height:17px;max-width:100%}
.c code{font-size:11px}
.c.se{background:#fce8e6;color:var(--err);font-weight:600}
.c.sw{background:#fef3d6;color:var(--warn);font-weight:600}
.c.si{background:#e8f0fe;color:var(--info)}
.c.su{background:#eee;color:#444}
.c.ok{background:#e6f4ea;color:var(--ok)}
.c.off{background:#fce8e6;color:var(--err)}
.c.tm{background:#e8f0fe;color:#174ea6}
.c.tr{background:#f3e8fd;color:#681da8}
.c.tc{background:#fef7e0;color:#8a4b00}
.c.to{background:#e6f4ea;color:#0d652d}
.c.tk{background:#e0f7fa;color:#006064}
.c.tx{background:#eceff1;color:#37474f}
.c.tn{background:#fff;border:1px dashed #bbb;color:#666}
.mk{font-size:11px;font-weight:600}
.mk.ch{color:#8a4b00}
.mk.dr{color:var(--err)}
.c.h0{background:#e3f2fd}.c.h1{background:#fce4ec}.c.h2{background:#e8f5e9}.c.h3{background:#fff3e0}
.c.h4{background:#ede7f6}.c.h5{background:#e0f2f1}.c.h6{background:#f9fbe7}.c.h7{background:#fbe9e7}
.c.h8{background:#e1f5fe}.c.h9{background:#f3e5f5}.c.h10{background:#f1f8e9}.c.h11{background:#fffde7}
/* Signals of a call. */
.sigs ul{list-style:none;margin:0;padding:0}
.sigs li{margin:3px 0;padding:4px 8px;border-left:4px solid #999;background:#fafafa;border-radius:0 4px 4px 0;
font-weight:400;color:#202124}
.sigs li.se{border-left-color:var(--err);background:#fdf1f0}
.sigs li.sw{border-left-color:#d39b00;background:#fffaf0}
.sigs li.si{border-left-color:var(--info);background:#f4f8ff}
.sigs li>code{display:block;color:var(--muted)}
.sigs li>small{display:block;color:#3c4043;font-size:12px}
[hidden]{display:none!important}
"""

SCRIPT: Final = r"""
(function () {
  "use strict";
  var root = document.documentElement;
  try {
    var keys = ["service", "model", "signal", "severity"];
    var form = document.getElementById("filters");
    var shown = document.getElementById("shown");
    var sections = Array.prototype.slice.call(document.querySelectorAll("section.conv"));
    var rows = {};
    Array.prototype.forEach.call(document.querySelectorAll("#summary tr[data-conv]"), function (row) {
      rows[row.getAttribute("data-conv")] = row;
    });
    var tokens = sections.map(function (section) {
      var found = {};
      keys.forEach(function (key) {
        var text = section.getAttribute("data-f-" + key) || "";
        found[key] = text.split(" ").filter(Boolean).map(decodeURIComponent);
      });
      return found;
    });
    var wanted = function () {
      var params = new URLSearchParams(location.hash.slice(1));
      var found = {};
      keys.forEach(function (key) {
        var value = params.get(key);
        found[key] = value ? value.split(",").filter(Boolean) : [];
      });
      return found;
    };
    var apply = function () {
      var want = wanted();
      var count = 0;
      sections.forEach(function (section, i) {
        var ok = keys.every(function (key) {
          return want[key].length === 0 || want[key].some(function (v) { return tokens[i][key].indexOf(v) >= 0; });
        });
        section.hidden = !ok;
        if (rows[section.id]) { rows[section.id].hidden = !ok; }
        if (ok) { count += 1; }
      });
      keys.forEach(function (key) {
        var select = form.elements[key];
        if (select) { select.value = want[key].length === 1 ? want[key][0] : ""; }
      });
      shown.textContent = "showing " + count + " of " + sections.length + " conversation" +
        (sections.length === 1 ? "" : "s");
      root.setAttribute("data-shown", String(count));
    };
    form.addEventListener("change", function () {
      var params = new URLSearchParams();
      keys.forEach(function (key) {
        var select = form.elements[key];
        if (select && select.value) { params.set(key, select.value); }
      });
      var next = params.toString();
      if (next === location.hash.slice(1)) { apply(); } else { location.hash = next; }
    });
    form.addEventListener("submit", function (event) { event.preventDefault(); });
    document.getElementById("clear").addEventListener("click", function (event) {
      event.preventDefault();
      location.hash = "";
    });
    document.addEventListener("click", function (event) {
      var link = event.target.closest ? event.target.closest("a.jump") : null;
      if (!link) { return; }
      var target = document.getElementById(link.getAttribute("href").slice(1));
      if (target) { event.preventDefault(); target.scrollIntoView(); }
    });
    window.addEventListener("hashchange", apply);
    form.hidden = false;
    apply();
    void document.body.offsetHeight;
    root.setAttribute("data-render-ms", String(Math.round(performance.now())));
    root.setAttribute("data-ready", "1");
  } catch (error) {
    root.setAttribute("data-error", String((error && error.message) || error));
  }
})();
"""


def csp_hash(source: str) -> str:
    """The CSP source expression allowing exactly this inline style or script."""
    digest = hashlib.sha256(source.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


# Nothing but the page's own style and script: no request of any kind (no image, font, frame or connection).
CONTENT_SECURITY_POLICY: Final = (
    f"default-src 'none'; style-src {csp_hash(CSS)}; script-src {csp_hash(SCRIPT)}; base-uri 'none'; form-action 'none'"
)
