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
.meta{color:var(--muted);margin:2px 0}
.mono,code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12px}
.muted{color:var(--muted)}
details.help{margin:6px 0;color:#3c4043}
details.help dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}
details.help dt{font-weight:600}
details.help dd{margin:0}
#filters{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;margin:8px 0 2px}
#filters label{font-weight:600;color:#3c4043}
#filters select{font:inherit;margin-left:4px;max-width:22em}
#shown{color:var(--muted)}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid var(--line);padding:3px 6px;text-align:left;vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:12px;background:#f1f3f4}
td.n{text-align:right;font-variant-numeric:tabular-nums}
section{margin:12px 0}
#summary table{border:1px solid var(--line)}
#summary td.z{color:#b0b4b8}
.conv{padding:10px 12px;background:#fff;border:1px solid var(--line);border-left:5px solid var(--ok);border-radius:6px;
content-visibility:auto;contain-intrinsic-size:auto 420px}
.conv.sev-error{border-left-color:var(--err)}
.conv.sev-warning{border-left-color:#d39b00}
.conv.sev-info{border-left-color:var(--info)}
.timeline{margin-top:6px;table-layout:fixed}
.timeline col.turn{width:56px}
.timeline col.time{width:104px}
.timeline col.call{width:15%}
.timeline col.state{width:12%}
.timeline col.instr{width:13%}
.timeline col.items{width:22%}
.timeline col.tools{width:9%}
.timeline col.reason{width:11%}
.timeline col.tokens{width:12%}
.timeline td{overflow-wrap:anywhere}
.timeline .chip{white-space:normal;max-width:100%}
tbody.call>tr.main>td{border-bottom:none;padding-top:6px}
tbody.call.loss>tr>td{background:#fff7f6}
tbody.call.loss>tr.main>td.turn{box-shadow:inset 3px 0 0 var(--err)}
tr.ids>td{color:var(--muted);font-size:11px;border-bottom:none;padding-top:0;padding-bottom:2px}
tr.ids span{margin-right:12px}
tr.sigs>td{padding-top:0}
td.turn{font-weight:700;font-size:14px}
td.turn small{display:block;font-weight:400;font-size:11px;color:var(--muted)}
tbody.gap td{color:var(--warn);font-style:italic;
background:repeating-linear-gradient(135deg,#fffaf0 0 8px,#fff3dc 8px 16px)}
.chip{display:inline-block;padding:0 6px;margin:1px 3px 1px 0;border-radius:9px;background:var(--chip);font-size:11px;
line-height:17px;white-space:nowrap}
.chip.mono{font-size:11px}
.b-error{background:#fce8e6;color:var(--err);font-weight:600}
.b-warning{background:#fef3d6;color:var(--warn);font-weight:600}
.b-info{background:#e8f0fe;color:var(--info)}
.b-unknown{background:#eee;color:#444}
.b-ok{background:#e6f4ea;color:var(--ok)}
.b-off{background:#fce8e6;color:var(--err)}
.t-message{background:#e8f0fe;color:#174ea6}
.t-reasoning{background:#f3e8fd;color:#681da8}
.t-call{background:#fef7e0;color:#8a4b00}
.t-output{background:#e6f4ea;color:#0d652d}
.t-compaction{background:#e0f7fa;color:#006064}
.t-other{background:#eceff1;color:#37474f}
.t-more{background:#fff;border:1px dashed #bbb;color:#666}
.io{display:block}
.io b{display:inline-block;width:26px;color:var(--muted);font-weight:400;font-size:11px}
.mark{font-size:11px;font-weight:600}
.mark-changed{color:#8a4b00}
.mark-dropped{color:var(--err)}
.h0{background:#e3f2fd}.h1{background:#fce4ec}.h2{background:#e8f5e9}.h3{background:#fff3e0}.h4{background:#ede7f6}
.h5{background:#e0f2f1}.h6{background:#f9fbe7}.h7{background:#fbe9e7}.h8{background:#e1f5fe}.h9{background:#f3e5f5}
.h10{background:#f1f8e9}.h11{background:#fffde7}
ul.signals{list-style:none;margin:0;padding:0}
li.signal{margin:3px 0;padding:4px 8px;border-left:4px solid #999;background:#fafafa;border-radius:0 4px 4px 0}
li.signal.sev-error{border-left-color:var(--err);background:#fdf1f0}
li.signal.sev-warning{border-left-color:#d39b00;background:#fffaf0}
li.signal.sev-info{border-left-color:var(--info);background:#f4f8ff}
li.signal .name{font-weight:700;margin-right:6px}
li.signal .fix{display:block;color:#3c4043}
li.signal .detail{display:block;color:var(--muted)}
.error-type{color:var(--err);font-weight:600}
.problems li{color:var(--err)}
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
