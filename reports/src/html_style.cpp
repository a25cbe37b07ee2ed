#include "html_style.h"

namespace parity::reports {

// A restrained palette: ink on a light grey page, white cards, one tone per status (green pass,
// red fail, amber warn, grey not recorded) used for the verdict, the badges and nothing else.
// Charts scale with the page; on a phone they stack, tables scroll sideways, and in print the
// page drops its background and keeps cards whole.
const char* const kReportCss = R"css(
:root {
  --ink: #1f2933; --muted: #66707d; --line: #e3e6ea; --page: #f5f6f8; --card: #ffffff;
  --pass: #1d7a45; --pass-bg: #e6f4eb; --fail: #c0392b; --fail-bg: #fbeae8;
  --warn: #b06a00; --warn-bg: #fbf1de; --none: #66707d; --none-bg: #eef0f2;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace;
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body {
  margin: 0; background: var(--page); color: var(--ink);
  font: 15px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
        sans-serif;
}
main { max-width: 1120px; margin: 0 auto; padding: 28px 24px 56px; }
h1 { font-size: 1.4rem; line-height: 1.35; font-weight: 650; margin: 0.9rem 0 0.4rem; }
h2 { font-size: 1.1rem; font-weight: 650; margin: 2.2rem 0 0.8rem; }
h3 { font-size: 1rem; font-weight: 650; margin: 0; }
code { font-family: var(--mono); font-size: 0.86em; overflow-wrap: anywhere; }
.muted { color: var(--muted); }
.tone-pass { --tone: var(--pass); --tone-bg: var(--pass-bg); }
.tone-fail { --tone: var(--fail); --tone-bg: var(--fail-bg); }
.tone-warn { --tone: var(--warn); --tone-bg: var(--warn-bg); }
.tone-none { --tone: var(--none); --tone-bg: var(--none-bg); }

.verdict {
  background: var(--card); border: 1px solid var(--line); border-top: 6px solid var(--tone);
  border-radius: 12px; padding: 22px 26px;
}
.kicker { color: var(--muted); font-size: 0.85rem; letter-spacing: 0.01em; }
.badge {
  display: inline-block; margin-top: 0.7rem; padding: 0.3rem 1rem 0.3rem 0.8rem;
  border-radius: 999px; background: var(--tone); color: #fff;
  font-size: 1.35rem; font-weight: 750; letter-spacing: 0.04em; text-transform: uppercase;
}
.badge .mark { display: inline-block; width: 1.3em; text-align: center; }
.meta { margin: 0.2rem 0 0; color: var(--muted); font-size: 0.9rem; }
.tally { display: flex; flex-wrap: wrap; gap: 0.5rem; list-style: none; margin: 1rem 0 0; padding: 0; }

.status {
  display: inline-block; padding: 0.1rem 0.6rem; border-radius: 999px; white-space: nowrap;
  background: var(--tone-bg); color: var(--tone); font-size: 0.8rem; font-weight: 650;
}

.diagnosis {
  background: var(--card); border: 1px solid var(--line); border-left: 5px solid var(--fail);
  border-radius: 10px; padding: 14px 20px; margin-bottom: 12px;
}
.diagnosis header { display: flex; align-items: baseline; gap: 0.6rem; flex-wrap: wrap; }
.pitfall {
  font-family: var(--mono); font-weight: 700; font-size: 0.85rem; color: var(--fail);
  background: var(--fail-bg); border-radius: 6px; padding: 0.05rem 0.45rem;
}
.diagnosis p { margin: 0.5rem 0 0; }
.fix { background: #f1f5fb; border-radius: 8px; padding: 0.5rem 0.8rem; }
.fix strong { color: #1f4e99; }

.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: 0.55rem 0.8rem; }
th {
  color: var(--muted); font-size: 0.74rem; font-weight: 650; letter-spacing: 0.05em;
  text-transform: uppercase; border-bottom: 1px solid var(--line); white-space: nowrap;
}
tbody tr + tr td, tbody tr + tr th { border-top: 1px solid var(--line); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.checks .check-title { font-weight: 600; white-space: nowrap; }
.checks tr.check-detail td { border-top: none; padding-top: 0; }
dl.figures { display: flex; flex-wrap: wrap; gap: 0.4rem 1.6rem; margin: 0.2rem 0 0.6rem; }
dl.figures dt { color: var(--muted); font-size: 0.74rem; }
dl.figures dd { margin: 0; font-weight: 600; font-variant-numeric: tabular-nums; }
ul.details { margin: 0 0 0.6rem; padding-left: 1.2rem; font-size: 0.9rem; }
table.tensors { font-size: 0.85rem; margin: 0.2rem 0 0.6rem; background: #fafbfc; border-radius: 8px; }
table.tensors th, table.tensors td { padding: 0.3rem 0.6rem; white-space: nowrap; }
table.tensors td.name { font-family: var(--mono); font-size: 0.85em; }
tr.out td { color: var(--fail); }
.more { color: var(--muted); font-size: 0.85rem; margin: 0 0 0.6rem; }

.charts {
  display: grid; gap: 16px; grid-template-columns: repeat(auto-fill, minmax(min(100%, 440px), 1fr));
}
figure.chart {
  margin: 0; background: var(--card); border: 1px solid var(--line); border-radius: 10px;
  padding: 14px 16px 12px;
}
figcaption { font-weight: 650; }
.legend {
  display: flex; flex-wrap: wrap; gap: 0.2rem 1.1rem; list-style: none; margin: 0.2rem 0 0.4rem;
  padding: 0; color: var(--muted); font-size: 0.8rem;
}
.swatch { display: inline-block; width: 18px; height: 0; margin-right: 0.4rem; vertical-align: middle; }
.swatch.line { border-top: 2.5px solid currentColor; }
.swatch.dashed { border-top: 2.5px dashed currentColor; }
.swatch.area { height: 10px; background: currentColor; opacity: 0.3; border-radius: 2px; }
.swatch.bar { height: 10px; background: currentColor; border-radius: 2px; }
.swatch.marker {
  width: 0; border-left: 5px solid transparent; border-right: 5px solid transparent;
  border-top: 8px solid currentColor; margin: 0 0.6rem 0 0.2rem;
}
figure.chart svg { display: block; width: 100%; height: auto; }
.no-data {
  display: flex; align-items: center; justify-content: center; text-align: center;
  aspect-ratio: 2 / 1; padding: 1rem; border-radius: 8px; color: var(--muted);
  background: repeating-linear-gradient(135deg, #f7f8fa 0 10px, #f1f3f5 10px 20px);
}
.chart-note { margin: 0.4rem 0 0; color: var(--muted); font-size: 0.8rem; }

table.runs { table-layout: fixed; }
table.runs th:first-child { width: 13rem; }
table.runs td, table.runs th[scope="row"] { overflow-wrap: anywhere; }
table.runs th[scope="row"] {
  text-transform: none; letter-spacing: 0; font-size: 0.88rem; color: var(--muted);
  font-weight: 500; border-bottom: none;
}
tr.differs td { background: var(--warn-bg); }
.tolerances { margin: 0; }
.tolerances dt { font-weight: 600; margin-top: 0.5rem; }
.tolerances dd { margin: 0; }
footer { margin-top: 2.5rem; color: var(--muted); font-size: 0.8rem; }

/* A phone: each check stacks (status and title, then its summary and details), chart text grows
   to stay legible as the SVG scales down. */
@media (max-width: 600px) {
  body { font-size: 14px; }
  main { padding: 14px 12px 40px; }
  .verdict { padding: 16px; }
  .badge { font-size: 1.1rem; }
  h1 { font-size: 1.15rem; }
  th, td { padding: 0.45rem 0.5rem; }
  table.checks, table.checks > tbody, table.checks > tbody > tr, table.checks > tbody > tr > td {
    display: block;
  }
  table.checks > thead, table.checks > tbody > tr > td.num,
  table.checks > tbody > tr.check-detail > td:first-child {
    display: none;
  }
  table.checks > tbody { padding: 0.5rem 0.25rem; }
  table.checks > tbody + tbody { border-top: 1px solid var(--line); }
  table.checks > tbody > tr:first-child { display: flex; flex-wrap: wrap; align-items: baseline; }
  table.checks > tbody > tr:first-child > td { border: none; padding: 0.15rem 0.5rem; }
  table.checks > tbody > tr:first-child > td:nth-child(3) { flex-basis: 100%; }
  table.checks > tbody > tr > td.failing-step { display: block; flex-basis: 100%; text-align: left; }
  table.checks > tbody > tr > td.failing-step::before {
    content: "first failing step "; color: var(--muted);
  }
  table.checks > tbody > tr.check-detail > td { padding: 0.3rem 0.5rem 0; }
  figure.chart svg { font-size: 16px; }
  table.runs th:first-child { width: 7.5rem; }
}
@media print {
  body { background: #fff; font-size: 10.5pt; }
  main { max-width: none; padding: 0; }
  .verdict, .card, figure.chart, .diagnosis { border-color: #ccc; }
  .verdict, .badge, .status, .pitfall, tr.differs td, .swatch {
    -webkit-print-color-adjust: exact; print-color-adjust: exact;
  }
  .charts { grid-template-columns: 1fr 1fr; }
  figure.chart, .diagnosis, tr { break-inside: avoid; }
  .scroll { overflow: visible; }
  h2 { break-after: avoid; }
}
)css";

}  // namespace parity::reports
