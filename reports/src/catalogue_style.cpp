#include "html_style.h"

namespace parity::reports {

// On top of report.html's stylesheet. Five of the table's eight columns are prose, so the page is
// wider than report.html, the prose a little smaller, and the columns have fixed shares; the
// case id does not wrap. A case that differs is tinted in the fail tone, with a bar on its left
// edge and a solid pill. On a phone each row becomes a card: the case, its outcome and report
// link on one line, then the title, each piece of prose under its heading. Printed, the page
// turns to landscape and keeps rows whole.
const char* const kCatalogueCss = R"css(
main.catalogue { max-width: 1480px; }
table.catalogue { font-size: 0.86rem; line-height: 1.45; width: 100%; table-layout: fixed; }
/* Fixed column shares keep the outcome column on screen at 1200px; prose wraps inside them. */
table.catalogue th:nth-child(1) { width: 4%; }
table.catalogue th:nth-child(2) { width: 12.5%; }
table.catalogue th:nth-child(3) { width: 15%; }
table.catalogue th:nth-child(4) { width: 8.5%; }
table.catalogue th:nth-child(5) { width: 16%; }
table.catalogue th:nth-child(6) { width: 21%; }
table.catalogue th:nth-child(7) { width: 11%; }
table.catalogue th:nth-child(8) { width: 12%; }
table.catalogue th, table.catalogue td { padding: 0.65rem 0.7rem; }
table.catalogue td.case-id {
  font-family: var(--mono); font-weight: 700; font-size: 0.95rem; white-space: nowrap;
}
table.catalogue td.case-title { overflow-wrap: break-word; }
.case-title strong { display: block; font-weight: 650; }
.case-meta { display: block; margin-top: 0.25rem; color: var(--muted); font-size: 0.78rem; }
.case-meta code { font-size: 0.95em; }
table.catalogue td.prose { overflow-wrap: break-word; }
table.catalogue td.case-outcome { white-space: nowrap; }
.case-report { display: block; margin: 0.45rem 0 0 0.2rem; font-size: 0.8rem; }
a.case-report { color: #1f4e99; font-weight: 600; }
a.case-report::after { content: " ›"; }
.case-report.refused { color: var(--fail); }
tr.case-differs td { background: var(--fail-bg); }
tr.case-differs td:first-child { box-shadow: inset 5px 0 0 var(--fail); color: var(--fail); }
tr.case-differs .status { background: var(--fail); color: #fff; }
tr.case-not-supported td.prose { color: var(--muted); }
/* The verdict on a document's claim: news about the document, not a pass or a failure of the
   catalogue, so its chips are outlined rather than filled like the outcome's pills. */
.claim-verdict {
  display: inline-block; padding: 0.1rem 0.5rem; border: 1.5px solid var(--line);
  border-radius: 999px; font-weight: 650; font-size: 0.8rem; white-space: nowrap;
}
.verdict-confirmed { border-color: #2f7d4f; color: #2f7d4f; }
.verdict-refuted { border-color: #9b2c6f; color: #9b2c6f; }
.verdict-partly { border-color: #a5640b; color: #8a5308; }
.verdict-not-reproducible-here, .verdict-not-checkable-here, .verdict-not-checked {
  border-style: dashed; color: var(--muted);
}
.verdict-unsettled { border-color: var(--fail); color: var(--fail); }
.verdict-tally { margin: 0.3rem 0 0.6rem; color: var(--muted); }
dl.case-facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.5rem 1.2rem; }
dl.case-facts dt { color: var(--muted); font-weight: 650; }
dl.case-facts dd { margin: 0; }
pre.case-toml { overflow-x: auto; font-size: 0.8rem; }
td.figure-name { white-space: nowrap; }

@media (max-width: 760px) {
  table.catalogue, table.catalogue > tbody, table.catalogue > tbody > tr,
  table.catalogue > tbody > tr > td {
    display: block;
  }
  table.catalogue > thead { display: none; }
  table.catalogue > tbody > tr {
    display: flex; flex-wrap: wrap; align-items: baseline; column-gap: 0.7rem;
    padding: 0.8rem 0.9rem 0.9rem;
  }
  table.catalogue > tbody > tr + tr { border-top: 1px solid var(--line); }
  table.catalogue > tbody > tr > td {
    border: none; padding: 0.15rem 0; min-width: 0; flex-basis: 100%; order: 3;
  }
  table.catalogue > tbody > tr > td.case-id { flex-basis: auto; order: 1; }
  table.catalogue > tbody > tr > td.case-outcome { flex-basis: auto; order: 2; }
  table.catalogue > tbody > tr > td.prose { padding-top: 0.4rem; }
  .case-report { display: inline; margin: 0 0 0 0.6rem; }
  table.catalogue td[data-label]::before {
    content: attr(data-label); display: block; color: var(--muted); font-size: 0.7rem;
    font-weight: 650; letter-spacing: 0.05em; text-transform: uppercase;
  }
  tr.case-differs { background: var(--fail-bg); box-shadow: inset 5px 0 0 var(--fail); }
  tr.case-differs td:first-child { box-shadow: none; }
}
@page { size: A4 landscape; margin: 12mm; }
@media print {
  main.catalogue { max-width: none; }
  table.catalogue { font-size: 8pt; }
  table.catalogue th, table.catalogue td { padding: 0.3rem 0.45rem; }
  tr.case-differs td { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  a.case-report { color: inherit; }
}
)css";

}  // namespace parity::reports
