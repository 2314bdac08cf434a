"""The HTML report's one stylesheet, inline in the page (nothing fetched): screen and print."""

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1f24;margin:24px;max-width:1400px}
h1{font-size:22px;margin:0 0 12px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.banner{padding:10px 14px;border-radius:6px;font-weight:600;margin-bottom:8px}
.bad{background:#ffebe9;border:1px solid #ff8182;color:#82071e}.good{background:#dafbe1;border:1px solid #4ac26b;color:#116329}
table{border-collapse:collapse;margin:6px 0 10px;width:100%}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.v{display:inline-block;padding:1px 7px;border-radius:10px;font-weight:600;font-size:12px;white-space:nowrap}
.v-passed{background:#dafbe1;color:#116329}.v-failed,.v-error,.v-timeout{background:#ffebe9;color:#82071e}
.v-gated,.v-no-gpu{background:#fff8c5;color:#7d4e00}.v-other{background:#eaeef2;color:#424a53}
.flag{color:#cf222e;font-weight:700}.muted{color:#57606a;font-size:12px}
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0 12px}dt{font-weight:600}dd{margin:0}
dd{overflow-wrap:anywhere}
.blockers{background:#fff8c5;border:1px solid #d4a72c;border-radius:6px;padding:6px 12px;margin:6px 0}
.blockers ul,.banner ul{margin:4px 0;padding-left:20px}
figure{margin:8px 0 14px}figcaption{font-weight:600;margin-bottom:2px}
table.claims th:nth-child(2){width:34%}table.claims th:nth-child(3){width:7%}table.claims th:last-child{width:12%}
table.history td.vals{font-size:12px;color:#57606a}
svg.chart{max-width:100%;height:auto;display:block}svg.spark{display:block}
tr.standout td{background:#ffebe9}tr.regressed td{background:#fff1f0}.why{font-size:12px}
table.claims td{font-size:12.5px}table.history td{vertical-align:middle}
details{margin:6px 0 12px}summary{cursor:pointer;color:#0969da}
dl.audited{margin:4px 0 10px;font-size:13px}.cause{font-weight:400}.cause .mono{font-weight:600}
nav.toc{margin:8px 0 4px}nav.toc ol{margin:2px 0;padding-left:22px;columns:3}
@media print{
body{margin:0;max-width:none;font-size:10.5px}
code,.mono{font-size:9.5px}.muted,.why,table.claims td{font-size:9px}.v{font-size:9.5px}th,td{padding:2px 5px}
a{color:inherit}h2{break-after:avoid}h3{break-after:avoid}
tr,figure,svg,.blockers,.banner{break-inside:avoid}
.banner,.v,tr.standout td,tr.regressed td,.blockers{-webkit-print-color-adjust:exact;print-color-adjust:exact}
details>summary{display:none}nav.toc{display:none}
}
"""  # noqa: E501 (a rule per line as the stylesheet is written; wrapping would change the report's bytes)
