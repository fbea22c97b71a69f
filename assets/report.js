// ctxlens report: draws a call's context when it is opened, from the data
// its session keeps in the page, and sorts the fleet table. Text from the
// log only ever goes in as text (textContent), never as markup.
"use strict";
(function () {
  const data = new Map();
  for (const node of document.querySelectorAll("script.session-data")) {
    data.set(node.dataset.for, node);
  }
  function sessionData(anchor) {
    const held = data.get(anchor);
    if (held instanceof Element) {
      data.set(anchor, JSON.parse(held.textContent));
    }
    return data.get(anchor);
  }
  function cell(row, text, cls) {
    const td = row.insertCell();
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }
  const KINDS = { s: "system", u: "user", a: "assistant", r: "reasoning", c: "tool_call",
    t: "tool_result", m: "compaction", x: "unknown" };
  const SENT = { v: "verbatim", p: "pinned", s: "stubbed", t: "truncated" };
  // The seq of each event, from the first and the steps.
  function seqs(d) {
    if (!d.seqList) {
      const n = d.kinds.length;
      d.seqList = new Array(n);
      let seq = d.seq0;
      for (let i = 0; i < n; i++) {
        if (i > 0) seq += d.gaps ? d.gaps[i - 1] : 1;
        d.seqList[i] = seq;
      }
    }
    return d.seqList;
  }
  // Each event's disposition and tokens at call `k`: the changes of every
  // call up to it, applied in order (kept, so the next call goes on from it).
  function stateAt(d, k) {
    if (!d.state || d.state.call > k) {
      d.state = { call: -1, code: new Array(d.kinds.length).fill(""), tokens: new Array(d.kinds.length).fill(0) };
    }
    const st = d.state;
    for (let c = st.call + 1; c <= k; c++) {
      const call = d.calls[c];
      if (!call) continue;
      for (const run of call.d) {
        const [first, n, code] = run;
        for (let i = first; i < first + n; i++) {
          st.code[i] = code;
          st.tokens[i] = run.length > 3 ? run[3] : (code === "v" || code === "p" ? d.tokens[i] : 0);
        }
      }
    }
    st.call = k;
    return st;
  }
  function eventRow(body, d, ix, code, tokens) {
    const row = body.insertRow();
    const tool = d.tool[ix] ? " " + d.tools[d.tool[ix] - 1] : "";
    cell(row, String(seqs(d)[ix]));
    cell(row, KINDS[d.kinds[ix]] + tool);
    cell(row, SENT[code], "status-" + SENT[code]);
    cell(row, tokens.toLocaleString());
    const size = d.chars[ix] ? " [" + d.chars[ix].toLocaleString() + " characters]" : "";
    cell(row, d.texts[ix] + size, "text");
  }
  function itemRow(body, d, item) {
    const row = body.insertRow();
    const tokens = item[item.length - 1];
    const kind = item[0];
    if (kind === "s") {
      const s = d.summaries[item[1]];
      cell(row, s[1] + "-" + s[2]);
      cell(row, "summary v" + s[0]);
      cell(row, "summary", "status-summary");
      cell(row, tokens.toLocaleString());
      cell(row, s[3] + (s[4] ? " [" + s[4].toLocaleString() + " characters]" : ""), "text");
    } else if (kind === "p" || kind === "g") {
      cell(row, item[1] + "-" + item[2]);
      cell(row, kind === "p" ? "placeholder" : "made by the engine");
      cell(row, kind === "p" ? "placeholder" : "summary", "status-" + (kind === "p" ? "placeholder" : "summary"));
      cell(row, tokens.toLocaleString());
      cell(row, kind === "p" ? "a summary is due here and none is recorded" : "", "text");
    } else if (kind === "i") {
      cell(row, "");
      cell(row, "injection");
      cell(row, "injected", "status-injected");
      cell(row, tokens.toLocaleString());
      cell(row, item[1], "text");
    } else {
      cell(row, "");
      cell(row, "recorded message " + item[1]);
      cell(row, "recorded", "status-summary");
      cell(row, tokens.toLocaleString());
      cell(row, "", "text");
    }
  }
  const SHOWN = 20;
  // Events sent alike one after another: the first and last SHOWN, and a
  // row that shows the rest when clicked.
  function drawGroup(body, d, st, group) {
    const n = group.length;
    // This call's dispositions, kept: the state moves on to other calls.
    const code = group.map((ix) => st.code[ix]);
    const tokens = group.map((ix) => st.tokens[ix]);
    const row = (i) => eventRow(body, d, group[i], code[i], tokens[i]);
    if (n <= 2 * SHOWN + 1) {
      for (let i = 0; i < n; i++) row(i);
      return;
    }
    for (let i = 0; i < SHOWN; i++) row(i);
    const more = body.insertRow();
    more.className = "more";
    let hidden = 0;
    for (let i = SHOWN; i < n - SHOWN; i++) hidden += tokens[i];
    const td = cell(more, (n - 2 * SHOWN).toLocaleString() + " more " + SENT[code[0]] +
      " events (" + hidden.toLocaleString() + " tokens): show them");
    td.colSpan = 5;
    more.addEventListener("click", () => {
      const rest = document.createElement("tbody");
      for (let i = SHOWN; i < n - SHOWN; i++) eventRow(rest, d, group[i], code[i], tokens[i]);
      for (const r of Array.from(rest.rows)) body.insertBefore(r, more);
      more.remove();
    });
    for (let i = n - SHOWN; i < n; i++) row(i);
  }
  function drawContext(details) {
    const box = details.querySelector(".context");
    if (box.dataset.drawn) return;
    box.dataset.drawn = "1";
    const d = sessionData(details.closest(".calls").dataset.for);
    const k = Number(details.dataset.index);
    if (!d.calls[k]) {
      box.textContent = "This call could not be projected.";
      return;
    }
    const st = stateAt(d, k);
    // In the order sent: the system prompt, what stands for the oldest
    // span, pinned events, the rest in log order, injections last.
    const system = [], pinned = [], rest = [];
    let away = 0;
    for (let i = 0; i < st.code.length; i++) {
      const code = st.code[i];
      if (code === "" ) continue;
      if (code === "z" || code === "x") { away++; continue; }
      if (d.kinds[i] === "s") system.push(i);
      else if (code === "p") pinned.push(i);
      else rest.push(i);
    }
    const items = d.calls[k].x;
    const table = document.createElement("table");
    const head = table.createTHead().insertRow();
    for (const name of ["seq", "kind", "sent as", "tokens", "text"]) {
      const th = document.createElement("th");
      th.textContent = name;
      head.appendChild(th);
    }
    const body = table.createTBody();
    const groups = (list) => {
      let start = 0;
      for (let i = 1; i <= list.length; i++) {
        if (i === list.length || st.code[list[i]] !== st.code[list[start]]) {
          if (i > start) drawGroup(body, d, st, list.slice(start, i));
          start = i;
        }
      }
    };
    groups(system);
    for (const item of items) if (item[0] !== "i") itemRow(body, d, item);
    groups(pinned);
    groups(rest);
    for (const item of items) if (item[0] === "i") itemRow(body, d, item);
    const note = document.createElement("p");
    const sent = system.length + pinned.length + rest.length;
    note.textContent = sent.toLocaleString() + " events sent, " + items.length +
      " other items; " + away.toLocaleString() + " events summarized or dropped";
    box.appendChild(note);
    box.appendChild(table);
  }
  for (const details of document.querySelectorAll("details.call")) {
    details.addEventListener("toggle", () => {
      if (details.open) drawContext(details);
    });
    if (details.open) drawContext(details);
  }
  // A link to a call (#s-1-c42) opens it.
  function openLinked() {
    const target = location.hash && document.getElementById(location.hash.slice(1));
    if (target && target.matches("details.call")) {
      target.open = true;
      drawContext(target);
    }
  }
  window.addEventListener("hashchange", openLinked);
  openLinked();
  for (const table of document.querySelectorAll("table.sortable")) {
    const heads = Array.from(table.tHead.rows[0].cells);
    heads.forEach((th, column) => {
      th.addEventListener("click", () => {
        const descending = th.getAttribute("aria-sort") === "ascending";
        heads.forEach((h) => h.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        const body = table.tBodies[0];
        const key = (row) => {
          const c = row.cells[column];
          return c.dataset.sort !== undefined ? c.dataset.sort : c.textContent;
        };
        // Numbers as numbers where both are, else text.
        const compare = (x, y) => {
          const a = Number(x), b = Number(y);
          if (x !== "" && y !== "" && !Number.isNaN(a) && !Number.isNaN(b)) return a - b;
          return x.toLowerCase().localeCompare(y.toLowerCase());
        };
        const rows = Array.from(body.rows).sort((a, b) => {
          const order = compare(key(a), key(b));
          return descending ? -order : order;
        });
        for (const row of rows) body.appendChild(row);
      });
    });
  }
})();
