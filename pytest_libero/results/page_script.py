"""The review page's style and script (results/page.py puts both inline, so report.html is one static
file that opens from disk, with no server and nothing fetched from the network).

The script reads the episodes from the page's JSON block (dictionary-encoded: page.page_data) and
renders only one page of rows at a time (PAGE_SIZE), errored first, then failed, unattempted and
passed (or by goal progress at the end when the records carry it: the `sort` select); a video
element is created only when a reviewer opens an episode (a row, a grid cell or `#episode=<cell>`
in the address).
"""

from __future__ import annotations

PAGE_SIZE = 50

STYLE = """
body{font-family:sans-serif;margin:1.5em;color:#222} td,th{vertical-align:top;text-align:left}
table{border-collapse:collapse} .libero-table td,.libero-table th,#tasks td,#tasks th,#episode-table td,
#episode-table th{border:1px solid #bbb;padding:3px 6px}
.passed{color:#080} .failed{color:#b00} .errored{color:#a60} .unattempted{color:#777}
nav a{margin-right:1em}
.bar{position:relative;width:160px;height:12px;background:#eee;border:1px solid #ccc}
.bar .rate{position:absolute;left:0;top:0;bottom:0;background:#4c72b0}
.bar .ci{position:absolute;top:5px;height:2px;background:#222}
#filters label{margin-right:1em;white-space:nowrap} #filters select{max-width:22em}
#episode-table tr.episode{cursor:pointer} #episode-table tr.episode:hover{background:#f3f6ff}
.poster{display:inline-block;width:96px;height:36px;line-height:36px;text-align:center;font-size:11px;
color:#fff;border-radius:3px;background:#888} .poster.passed{background:#2a7d2a}
.poster.failed{background:#b33} .poster.errored{background:#c80} .poster.unattempted{background:#999}
#episode-detail{border:2px solid #4c72b0;padding:.6em 1em;margin:1em 0;background:#fafcff}
#episode-detail video{width:512px;max-width:100%;display:block;margin-top:.5em}
#tasks td:first-child{white-space:nowrap}
#grid td{padding:0} #grid th{font-weight:normal;font-size:11px;padding-right:6px;white-space:nowrap}
#grid a{display:block;width:11px;height:11px;margin:1px;border-radius:2px;background:#999}
#grid a.passed{background:#2a7d2a} #grid a.failed{background:#c33} #grid a.errored{background:#e90}
.legend span{display:inline-block;width:11px;height:11px;margin:0 3px 0 10px;vertical-align:middle}
"""

SCRIPT = r"""
(function () {
  "use strict";
  const PAGE = PAGE_SIZE;
  const data = JSON.parse(document.getElementById("libero-data").textContent);
  const episodes = data.rows.map(function (row) {
    const e = {};
    for (let k = 0; k < data.fields.length; k++) e[data.fields[k]] = data.values[k][row[k]];
    return e;
  });
  const RANK = {errored: 0, failed: 1, unattempted: 2, passed: 3};
  episodes.forEach(function (e, i) { e.index = i; });
  const ordered = episodes.slice().sort(function (a, b) {
    return (RANK[a.status] - RANK[b.status]) || (a.index - b.index);
  });
  const byCell = new Map(episodes.map(function (e) { return [e.cell, e]; }));
  const $ = function (id) { return document.getElementById(id); };
  const filters = {suite: $("f-suite"), task: $("f-task"), outcome: $("f-outcome"),
                   category: $("f-category"), difficulty: $("f-difficulty"), text: $("f-text"),
                   sort: $("f-sort")};
  const plus = episodes.some(function (e) { return e.category != null; });
  const progress = episodes.some(function (e) { return e.progress_end != null; });
  let matches = ordered, page = 0, renders = 0;

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text != null) node.textContent = text;
    if (cls) node.className = cls;
    return node;
  }
  function fill(select, values, label) {
    for (const v of values) {
      const option = el("option", label ? label(v) : v);
      option.value = v;
      select.appendChild(option);
    }
  }
  function distinct(key) {
    const seen = [];
    const known = new Set();
    for (const e of episodes) {
      const v = e[key] == null ? (key === "difficulty" ? "none" : null) : String(e[key]);
      if (v != null && !known.has(v)) { known.add(v); seen.push(v); }
    }
    return seen;
  }
  fill(filters.suite, distinct("suite"));
  fill(filters.task, distinct("task"));
  fill(filters.outcome, ["errored", "failed", "unattempted", "passed"].map(function (s) { return "status:" + s; }),
       function (v) { return v.slice(7) + " (all)"; });
  fill(filters.outcome, distinct("outcome").map(function (o) { return "outcome:" + o; }),
       function (v) { return "outcome " + v.slice(8); });
  if (plus) {
    fill(filters.category, distinct("category"));
    fill(filters.difficulty, distinct("difficulty").sort());
  } else {
    for (const node of document.querySelectorAll(".plus-only")) node.hidden = true;
  }
  if (!progress) for (const node of document.querySelectorAll(".progress-only")) node.hidden = true;

  function keep(e, f) {
    if (f.suite && e.suite !== f.suite) return false;
    if (f.task && e.task !== f.task) return false;
    if (f.outcome) {
      const cut = f.outcome.indexOf(":");
      const value = f.outcome.slice(0, cut) === "status" ? e.status : e.outcome;
      if (value !== f.outcome.slice(cut + 1)) return false;
    }
    if (f.category && e.category !== f.category) return false;
    if (f.difficulty && (e.difficulty == null ? "none" : String(e.difficulty)) !== f.difficulty) return false;
    if (f.text && (e.cell + " " + (e.language || "") + " " + (e.message || "")).toLowerCase().indexOf(f.text) < 0)
      return false;
    return true;
  }
  function apply() {
    const f = {};
    for (const name in filters) f[name] = filters[name].value;
    f.text = f.text.trim().toLowerCase();
    matches = ordered.filter(function (e) { return keep(e, f); });
    if (f.sort) {  // goal progress at the end; episodes without it last, ties in the default order
      const sign = f.sort === "progress-desc" ? -1 : 1;
      matches = matches.slice().sort(function (a, b) {
        const x = a.progress_end, y = b.progress_end;
        if (x == null || y == null) return (x == null) - (y == null);
        return sign * (x - y);
      });
    }
    page = 0;
    render();
  }
  function variant(e) {
    return (e.category || "unknown") + ", " + (e.difficulty == null ? "none" : e.difficulty);
  }
  function row(e) {
    const tr = el("tr", null, "episode " + e.status);
    tr.dataset.cell = e.cell;
    const poster = el("td");
    poster.appendChild(el("span", e.video ? "\u25b6 open video" : "no video", "poster " + e.status));
    tr.appendChild(poster);
    const cell = el("td");
    cell.appendChild(el("code", e.cell));
    if (e.language) { cell.appendChild(el("br")); cell.appendChild(el("span", e.language)); }
    tr.appendChild(cell);
    tr.appendChild(el("td", e.task));
    tr.appendChild(el("td", e.status, e.status));
    tr.appendChild(el("td", e.outcome + (e.termination && e.termination !== e.outcome ? " / " + e.termination : "")));
    if (plus) tr.appendChild(el("td", variant(e)));
    if (progress) tr.appendChild(el("td", e.progress == null ? "-" : e.progress, "progress"));
    tr.appendChild(el("td", e.counters));
    tr.appendChild(el("td", e.message));
    tr.addEventListener("click", function () {
      const hash = "#episode=" + encodeURIComponent(e.cell);
      if (location.hash === hash) open(e.cell); else location.hash = hash;
    });
    return tr;
  }
  function render() {
    const start = page * PAGE;
    const shown = matches.slice(start, start + PAGE);
    $("episode-rows").replaceChildren.apply($("episode-rows"), shown.map(row));
    const count = $("episode-count");
    count.textContent = shown.length
      ? "showing " + (start + 1) + "-" + (start + shown.length) + " of " + matches.length +
        " matching episodes (" + episodes.length + " in the run)"
      : "no matching episode (" + episodes.length + " in the run)";
    count.dataset.matches = String(matches.length);
    $("prev").disabled = page === 0;
    $("next").disabled = start + PAGE >= matches.length;
    document.body.dataset.renders = String(++renders);
  }
  function open(name) {
    const e = byCell.get(name);
    const box = $("episode-detail");
    if (!e) return;
    const parts = [el("h3", e.cell)];
    const facts = [["task", e.task], ["status", e.status],
                   ["outcome", e.outcome + (e.termination ? " / " + e.termination : "")],
                   ["language", e.language], ["counters", e.counters], ["message", e.message]];
    if (plus) facts.push(["category, difficulty", variant(e)]);
    if (e.progress != null) facts.push(["goal progress", e.progress]);
    for (const fact of facts) {
      if (fact[1] == null || fact[1] === "") continue;
      const p = el("p");
      p.appendChild(el("b", fact[0] + ": "));
      p.appendChild(el("span", fact[1], fact[0] === "status" ? e.status : null));
      parts.push(p);
    }
    if (e.recorded) {
      const link = el("a", "episode record (JSON)");
      link.href = "episodes/" + encodeURIComponent(e.cell) + ".json";
      parts.push(link);
    }
    if (e.video) {
      const video = el("video");
      video.id = "episode-video";
      video.controls = true;
      video.preload = "auto";
      video.src = e.video;
      parts.push(video);
      const file = el("a", e.video);
      file.href = e.video;
      parts.push(file);
    } else {
      parts.push(el("p", "no video for this episode"));
    }
    box.replaceChildren.apply(box, parts);
    box.dataset.cell = e.cell;
    box.hidden = false;
    box.scrollIntoView({block: "nearest"});
  }
  function route() {
    const hash = decodeURIComponent(location.hash.slice(1));
    if (hash.indexOf("episode=") === 0) {
      open(hash.slice(8));
    } else if (hash.indexOf("task=") === 0) {
      filters.task.value = hash.slice(5);
      apply();
      $("episodes").scrollIntoView();
    }
  }
  function grid() {
    const holder = $("grid");
    if (!holder) return;
    const rows = new Map();
    const inits = new Set();
    for (const e of episodes) {
      if (e.init_index == null) continue;
      const key = e.task + (e.run_seed == null ? "" : " seed " + e.run_seed);
      if (!rows.has(key)) rows.set(key, new Map());
      rows.get(key).set(e.init_index, e);
      inits.add(e.init_index);
    }
    const columns = Array.from(inits).sort(function (a, b) { return a - b; });
    const table = el("table");
    const head = el("tr");
    head.appendChild(el("th", "task \\ init state"));
    for (const c of columns) head.appendChild(el("th", String(c)));
    table.appendChild(head);
    for (const [key, cells] of rows) {
      const tr = el("tr");
      tr.appendChild(el("th", key));
      for (const c of columns) {
        const td = el("td");
        const e = cells.get(c);
        if (e) {
          const a = el("a", null, e.status);
          a.href = "#episode=" + encodeURIComponent(e.cell);
          a.title = e.cell + ": " + e.outcome;
          td.appendChild(a);
        }
        tr.appendChild(td);
      }
      table.appendChild(tr);
    }
    holder.appendChild(table);
  }

  for (const name in filters) filters[name].addEventListener(name === "text" ? "input" : "change", apply);
  $("prev").addEventListener("click", function () { page -= 1; render(); });
  $("next").addEventListener("click", function () { page += 1; render(); });
  window.addEventListener("hashchange", route);
  grid();
  apply();
  route();
})();
"""
