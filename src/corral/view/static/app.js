// The Corral viewer: renders the route in the URL's hash from the server's JSON API,
// or, in an exported file, from the JSON inlined in the page.
// Everything shown comes from agents, tools and environments and is untrusted: it only
// ever reaches the page as text nodes (el() below); no HTML string is ever parsed.
"use strict";
(function () {
  const dataNode = document.getElementById("corral-data");
  const EXPORT = dataNode ? JSON.parse(dataNode.textContent) : null;
  const main = document.getElementById("main");
  const statusLine = document.getElementById("status");
  const FOLD = 400; // characters shown before a value is folded
  const PAGE_SIZE = 50; // trials a page of the list unless ?size= says (corral/view/_index.py)
  const MAX_PAGE_SIZE = 500; // and the most it may say
  let timer = null; // a pending refresh of a live page
  let keys = null; // the current page's keyboard handler
  let generation = 0; // renders started; a stale one draws nothing
  const Charts = window.CorralCharts;
  // The load of each benchmark last drawn (the server's version), by id: a Map, since an
  // id may be any name, "constructor" or "__proto__" too (an object has those already).
  const versions = new Map();
  let updated = null; // {id, at}: the benchmark whose data changed under an open page
  const comparing = {}; // the benchmarks chosen to compare on the benchmarks page

  // -- building the page from data, as text ----------------------------------------
  function el(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "href") node.setAttribute("href", hashHref(value));
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined) continue;
      node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  }

  // Links only ever go to routes of this page: a value is never a URL.
  function hashHref(href) {
    return href.startsWith("#/") ? href : "#/";
  }

  function link(path, params) {
    const clean = {};
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== "" && v !== null && v !== undefined) clean[k] = String(v);
    }
    const query = new URLSearchParams(clean).toString();
    return "#" + path + (query ? "?" + query : "");
  }

  function text(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  // A value in full, folded when long: the rest is rendered when it is opened.
  function fold(value) {
    const full = text(value === undefined ? null : value);
    if (full.length <= FOLD && full.split("\n").length <= 12) return el("pre", {}, full);
    const pre = el("pre", {});
    const box = el(
      "details",
      { class: "fold" },
      el("summary", {}, full.slice(0, 160).replace(/\s+/g, " "), " … (" + full.length + " characters)"),
      pre,
    );
    box.addEventListener("toggle", () => {
      if (box.open && !pre.firstChild) pre.textContent = full;
    });
    return box;
  }

  function num(value, digits) {
    if (value === null || value === undefined) return "–";
    if (typeof value !== "number") return String(value);
    return digits === undefined ? value.toLocaleString("en") : value.toFixed(digits);
  }

  function when(seconds) {
    return seconds ? new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) : "–";
  }

  function table(headers, rows, attrs) {
    return el(
      "table",
      attrs || {},
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
      el("tbody", {}, rows),
    );
  }

  // A metric's values by k ("pass@1 0.500 · pass@2 0.667"): its name with k for "k".
  function metricValues(metric, values) {
    if (!values) return "–";
    const stem = metric.name.replace(/k$/, "");
    return Object.entries(values).map(([k, v]) => stem + k + " " + num(v, 3)).join(" · ");
  }

  function passAtK(values) {
    return metricValues({ name: "pass@k" }, values);
  }

  function trialLink(id, taskId, trial, params) {
    return link("/trial", Object.assign({}, params || {}, { id: id, task: taskId, trial: trial }));
  }

  // -- data: the server's API, or the export's inline copy ---------------------------
  async function get(name, params) {
    if (EXPORT) return local(name, params);
    const response = await fetch("/api/" + name + "?" + new URLSearchParams(params));
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || "HTTP " + response.status);
    return body;
  }

  const SORTS = {
    task: "task_id", model: "model", environment: "environment", status: "status",
    error: "error", duration: "duration", tokens: "tokens", cost: "cost", score: "score",
  };

  // The export's trial list: the server's filters and order (corral/view/_index.py), in JS.
  function selectRows(rows, p) {
    const kept = rows.filter((r) =>
      (!p.task_has || r.task_id.includes(p.task_has)) &&
      (!p.error_has || (r.error !== null && r.error.includes(p.error_has))) &&
      (!p.model || r.model === p.model) &&
      (!p.environment || r.environment === p.environment) &&
      (!p.status || r.status === p.status) &&
      (!p.passed || r.passed === (p.passed === "yes")));
    const sort = p.sort || "";
    const field = SORTS[sort.replace(/^-/, "")];
    if (!field) return kept;
    const sign = sort.startsWith("-") ? -1 : 1;
    const cmp = (a, b) => (typeof a === "string" ? byCodePoint(a, b) : a < b ? -1 : a > b ? 1 : 0);
    const present = kept.filter((r) => r[field] !== null);
    present.sort((a, b) => sign * (cmp(a[field], b[field]) || cmp(a.task_id, b.task_id) || a.trial - b.trial));
    return present.concat(kept.filter((r) => r[field] === null));
  }

  // Strings in Python's order, by code point: JavaScript's < compares UTF-16 units,
  // which puts a character past U+FFFF (an emoji) before U+E000-U+FFFF.
  function byCodePoint(a, b) {
    for (let i = 0; i < a.length && i < b.length; i++) {
      const x = a.codePointAt(i), y = b.codePointAt(i);
      if (x !== y) return x < y ? -1 : 1;
    }
    return a.length - b.length;
  }

  // A count of the query, checked as the server checks it (`corral.view._index._count`),
  // with its words: else "page=x" read as NaN ("page NaN of 3").
  function count(name, text, low, high) {
    const value = Number(text);
    if (!/^\s*[-+]?\d+\s*$/.test(text)) throw new Error(name + ": '" + text + "' is not an integer");
    if (value < low || value > high) throw new Error(name + ": " + value + " is outside " + low + ".." + high);
    return value;
  }

  function local(name, p) {
    const size = count("size", String(p.size || PAGE_SIZE), 1, MAX_PAGE_SIZE);
    const page = count("page", String(p.page || 0), 0, 10 ** 9);
    if (name === "benchmarks") return { benchmarks: EXPORT.benchmarks };
    if (name === "benchmark") return EXPORT.summary;
    const rows = selectRows(EXPORT.rows, p);
    if (name === "trials") {
      return { benchmark_id: EXPORT.summary.benchmark_id, total: rows.length, partial: false,
        page: page, size: size, rows: rows.slice(page * size, page * size + size) };
    }
    if (name === "task") {
      if (!Object.hasOwn(EXPORT.tasks, p.task)) throw new Error("no task " + p.task);
      return EXPORT.tasks[p.task];
    }
    if (name === "trial") {
      const key = p.task + "\u0000" + p.trial;
      if (!Object.hasOwn(EXPORT.trials, key)) throw new Error("no trial " + p.task + " #" + p.trial);
      const at = rows.findIndex((r) => r.task_id === p.task && String(r.trial) === String(p.trial));
      const near = (i) => (at < 0 || i < 0 || i >= rows.length ? null : { task_id: rows[i].task_id, trial: rows[i].trial });
      return Object.assign({}, EXPORT.trials[key], { previous: near(at - 1), next: near(at + 1), position: at < 0 ? null : at, listed: rows.length });
    }
    if (name === "compare" && p.a === p.b && p.ma && p.mb) {
      const key = p.ma + "\u0000" + p.mb;
      if (Object.hasOwn(EXPORT.compare || {}, key)) return EXPORT.compare[key];
    }
    throw new Error("comparing benchmarks needs the server: run corral view");
  }

  // -- routing ----------------------------------------------------------------------
  function current() {
    const hash = location.hash.slice(1) || "/";
    const at = hash.indexOf("?");
    const path = at < 0 ? hash : hash.slice(0, at);
    const params = Object.fromEntries(new URLSearchParams(at < 0 ? "" : hash.slice(at + 1)));
    return { path: path, params: params };
  }

  const PAGES = { "/": benchmarksPage, "/benchmark": benchmarkPage, "/task": taskPage,
    "/trial": trialPage, "/compare": comparePage };

  async function render() {
    clearTimeout(timer);
    keys = null;
    const mine = ++generation;
    let { path, params } = current();
    // An export holds one benchmark: it opens on it, not on a one-line list.
    if (EXPORT && (path === "/" || !PAGES[path])) [path, params] = ["/benchmark", { id: EXPORT.summary.benchmark_id }];
    const page = PAGES[path] || benchmarksPage;
    statusLine.textContent = "loading…";
    try {
      const nodes = await page(params, () => mine === generation);
      if (mine !== generation) return;
      main.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined));
      statusLine.textContent = "";
    } catch (error) {
      if (mine !== generation) return;
      main.replaceChildren(el("p", { class: "error" }, String(error.message || error)));
      statusLine.textContent = "";
    }
  }

  function later(seconds) {
    if (EXPORT) return;
    const mine = generation;
    timer = setTimeout(() => {
      if (mine !== generation) return;
      const focus = document.activeElement;
      // Never redraw under someone typing a filter: try again a little later.
      if (focus && ["INPUT", "SELECT"].includes(focus.tagName)) later(seconds || 1);
      else render();
    }, seconds * 1000);
  }

  // Redraw the page once the benchmark's data changes in the store (a rescore, a
  // resume): the server's version of it is asked every few seconds.
  function watch(id, known) {
    if (EXPORT) return;
    const mine = generation;
    timer = setTimeout(async () => {
      if (mine !== generation) return;
      let now = known;
      try { now = (await get("version", { id: id })).version; } catch (error) { /* asked again */ }
      if (mine !== generation) return;
      if (known !== undefined && now !== known) {
        versions.set(id, now);
        updated = { id: id, at: new Date() };
        later(0);
      } else watch(id, now);
    }, 3000);
  }

  // The visible mark of data that changed while its page was open.
  function updatedMark(id) {
    if (!updated || updated.id !== id) return null;
    return el("span", { id: "updated", class: "updated", title: "the store changed: this page was redrawn" },
      "updated " + updated.at.toISOString().slice(11, 19) + " UTC");
  }

  // A new version of a benchmark's data since it was last drawn marks the page updated.
  function noteVersion(id, version) {
    if (versions.has(id) && versions.get(id) !== version) updated = { id: id, at: new Date() };
    versions.set(id, version);
  }

  // -- pages ------------------------------------------------------------------------
  async function benchmarksPage() {
    document.getElementById("where").textContent = "";
    const data = await get("benchmarks", {});
    const rows = data.benchmarks.map((b) =>
      el("tr", {},
        el("td", {}, el("a", { href: link("/benchmark", { id: b.benchmark_id }) }, b.benchmark_id)),
        el("td", {}, when(b.created_at)),
        el("td", {}, b.config.tasks + " tasks × " + b.config.trials_per_task + " · models " +
          (b.config.models.join(", ") || "–") + " · environments " + b.config.environments.join(", ")),
        el("td", { class: "n" }, num(b.finished) + " / " + num(b.total)),
        el("td", {}, b.pass_at_k ? passAtK(b.pass_at_k) : "loading…", " ", b.version ? updatedMark(b.benchmark_id) : null),
        el("td", { class: "n" }, num(b.errors))));
    for (const b of data.benchmarks) if (b.version) noteVersion(b.benchmark_id, b.version);
    if (data.benchmarks.some((b) => b.finished < b.total || b.pass_at_k === null)) later(2);
    else later(3); // a rescore or a resume changes a finished one
    const ids = data.benchmarks.map((b) => b.benchmark_id);
    // The choices survive the page's redraws (it redraws every few seconds).
    const pick = (name, first) => {
      const chosen = ids.includes(comparing[name]) ? comparing[name] : first;
      return el("select", { name: name, "aria-label": name, onchange: (event) => { comparing[name] = event.target.value; } },
        ids.map((id) => el("option", { value: id, selected: id === chosen }, id)));
    };
    const a = pick("a", ids[0]);
    const b = pick("b", ids[1] || ids[0]);
    const go = el("button", { type: "button", id: "compare",
      onclick: () => { location.hash = link("/compare", { a: a.value, b: b.value }); } }, "compare");
    return [
      el("h1", {}, "Benchmarks"),
      table(["benchmark", "created (UTC)", "configuration", "done / total", "pass@k", "errors"], rows, { id: "benchmarks" }),
      EXPORT ? null : el("p", { class: "compare" }, "Compare A ", a, " (baseline) with B ", b, " ", go),
    ];
  }

  const TABS = [["errors", "Errors"], ["tasks", "Tasks"], ["models", "Models"], ["charts", "Charts"], ["trials", "Trials"]];

  async function benchmarkPage(p) {
    const id = p.id;
    document.getElementById("where").textContent = id;
    const listParams = Object.assign({ id: id }, p);
    delete listParams.tab;
    const [summary, list] = await Promise.all([get("benchmark", { id: id }), get("trials", listParams)]);
    if (!summary.ready) {
      // Draw again once the whole benchmark is read (the server answers then).
      const mine = generation;
      get("benchmark", { id: id, wait: "1" }).then(() => { if (mine === generation) render(); }, () => later(2));
    } else if (summary.live) later(2);
    else watch(id, summary.version);
    if (summary.version) noteVersion(id, summary.version);
    if (list.partial) summary.loaded = Math.max(summary.loaded, list.total); // read meanwhile
    const panels = {
      errors: summary.ready ? errorsPanel(id, summary) : loadingNote(),
      tasks: summary.ready ? tasksPanel(id, summary) : loadingNote(),
      models: summary.ready && summary.models ? modelsPanel(id, summary) : null,
      charts: summary.ready ? chartsPanel(summary) : loadingNote(),
      trials: [filters(p, summary), trialList(id, p, list)],
    };
    const errors = summary.ready ? summary.error_count : null;
    const counts = { errors: errors, tasks: summary.config.tasks, models: summary.models ? summary.models.models.length : null,
      trials: list.partial ? null : list.total };
    return [el("h1", {}, id, " ", updatedMark(id)), overview(summary), tabs(p, panels, counts, errors)];
  }

  function loadingNote() {
    return el("p", { class: "note" }, "loading: shown once the whole benchmark is read");
  }

  // Sections of the benchmark page as tabs at its top (the trial list is one of them):
  // the chosen one is kept in the URL without a redraw.
  function tabs(p, panels, counts, errors) {
    const shown = TABS.filter(([name]) => panels[name] !== null);
    let chosen = shown.some(([name]) => name === p.tab) ? p.tab : "trials";
    const buttons = {}, boxes = {};
    const choose = (name) => {
      chosen = name;
      for (const [other] of shown) {
        buttons[other].setAttribute("aria-selected", String(other === name));
        boxes[other].hidden = other !== name;
      }
      const next = Object.assign({}, p, { tab: name === "trials" ? "" : name });
      history.replaceState(null, "", link("/benchmark", next));
    };
    for (const [name, label] of shown) {
      const count = counts[name];
      buttons[name] = el("button", { type: "button", role: "tab", id: "tab-" + name, class: name === "errors" && errors ? "tab has-errors" : "tab",
        "aria-selected": String(name === chosen), onclick: () => choose(name) },
        label + (count === null || count === undefined ? "" : " (" + num(count) + ")"));
      boxes[name] = el("section", { id: "panel-" + name, role: "tabpanel", hidden: name !== chosen }, panels[name]);
    }
    return [el("nav", { class: "tabs", role: "tablist", id: "tabs" }, shown.map(([name]) => buttons[name])), shown.map(([name]) => boxes[name])];
  }

  function overview(s) {
    const c = s.config;
    const lines = [el("p", {}, c.tasks + " tasks × " + c.trials_per_task + " trials · agents " +
      c.agents.join(", ") + " · models " + (c.models.join(", ") || "–") + " · environments " + c.environments.join(", "))];
    if (!s.ready) {
      lines.push(el("p", { class: "note", id: "loading" }, "loading: " + num(s.loaded) + " of " + num(s.expected) + " trials read"));
      return el("section", { id: "overview" }, lines);
    }
    const counts = Object.entries(s.counts).filter(([, n]) => n).map(([k, n]) => k + " " + num(n)).join(" · ");
    lines.push(
      el("p", { class: "big", id: "passk" }, passAtK(s.pass_at_k)),
      el("div", { class: "side" }, scoresTable(s.scores, s.scores_by_model, s.metrics, s.named_scores || {}), passKChart(s)),
      el("p", { class: "note" }, "95% intervals: " + s.interval.method + " (" + num(s.interval.resamples) + " resamples, seed " + s.interval.seed + ")"),
      el("p", {}, "status: " + counts + (s.live ? " · live: refreshing" : "")),
      el("p", {}, "usage: " + num(s.usage.input_tokens) + " input tokens · " + num(s.usage.output_tokens) +
        " output tokens · cost " + s.usage.cost_text + " · " + when(s.started_at) + " → " + when(s.finished_at)));
    const run = [(s.tags || []).map((t) => "#" + t).join(" "), s.note || ""].filter((x) => x).join(" · ");
    const from = s.provenance || {};
    const origin = [from.corral_version ? "corral " + from.corral_version : "",
      from.benchmark_file ? from.benchmark_file.split("/").pop() + (from.git_commit ? " @ " + from.git_commit.slice(0, 12) : "") : ""];
    if (run) lines.push(el("p", { id: "run-tags" }, "run: " + run));
    if (origin.some((x) => x)) lines.push(el("p", { class: "note", id: "provenance" }, "from " + origin.filter((x) => x).join(" · ")));
    const gen = Object.entries(s.generation || {}).map(([agent, g]) => agent + ": " + (g.model || "?") +
      Object.entries(g).filter(([k]) => k !== "model").map(([k, v]) => " · " + k + " " + v).join(""));
    if (gen.length) lines.push(el("p", { class: "note", id: "generation" }, "models: " + gen.join("; ")));
    const calls = Object.entries(s.model_calls || {});
    if (calls.length) {
      const kinds = Object.keys(calls[0][1].failed_tries);
      lines.push(el("p", {}, "model calls per model, with the tries that failed before a reply:"), table(["model", "calls", "mean latency"].concat(kinds.map((k) => "failed: " + k), ["rate-limit wait"]),
        calls.map(([model, c]) => el("tr", {}, el("td", {}, model), el("td", { class: "n" }, num(c.calls)),
          el("td", { class: "n" }, c.mean_latency_seconds === null ? "–" : num(c.mean_latency_seconds, 2) + " s"),
          kinds.map((k) => el("td", { class: "n" }, num(c.failed_tries[k] || 0))),
          el("td", { class: "n" }, num(c.rate_limit_wait_seconds, 1) + " s"))), { id: "model-calls" }));
    }
    return el("section", { id: "overview" }, lines);
  }

  // Each metric (pass@k, pass^k...) with its 95% intervals, overall and per model; then
  // a row per named score (Evaluation.scores): its mean over the tasks that have it.
  function scoresTable(scores, byModel, metrics, named) {
    const est = (e) => e ? num(e.value, 3) + " [" + num(e.low, 3) + ", " + num(e.high, 3) + "]" : "–";
    const rows = [];
    for (const [who, sc] of [["all tasks", scores]].concat(Object.entries(byModel))) {
      for (const k of Object.keys(sc[metrics[0].key])) {
        rows.push(el("tr", {}, el("td", {}, who), el("td", { class: "n" }, k),
          metrics.map((m) => el("td", {}, est((sc[m.key] || {})[k])))));
      }
    }
    for (const [score, e] of Object.entries(named)) {
      for (const [who, x] of [["all tasks", e]].concat(Object.entries(e.by_model))) {
        rows.push(el("tr", { class: "named-score" }, el("td", {}, who), el("td", {}, score),
          el("td", { colspan: metrics.length }, est(x) + " · " + num(x.tasks) + " tasks")));
      }
    }
    return table(["tasks", "k"].concat(metrics.map((m) => m.name + " [95% interval]")), rows, { id: "scores" });
  }

  function filters(p, s) {
    const f = (s.facets || {});
    const choice = (name, values) => el("label", {}, name + " ",
      el("select", { name: name, "data-filter": name },
        el("option", { value: "" }, "any"),
        Object.keys(values || {}).sort().map((v) => el("option", { value: v, selected: p[name] === v }, v + " (" + values[v] + ")"))));
    const field = (label, name) => el("label", {}, label + " ", el("input", { name: name, "data-filter": name, value: p[name] || "", size: 14 }));
    const sortBy = el("select", { name: "sort", "data-filter": "sort" },
      el("option", { value: "" }, "task, trial (store order)"),
      Object.keys(SORTS).flatMap((k) => [
        el("option", { value: k, selected: p.sort === k }, k + " ↑"),
        el("option", { value: "-" + k, selected: p.sort === "-" + k }, k + " ↓")]));
    const passed = el("select", { name: "passed", "data-filter": "passed" },
      ["", "yes", "no"].map((v) => el("option", { value: v, selected: (p.passed || "") === v }, v || "any")));
    const form = el("form", { id: "filters", class: "filters" },
      field("task", "task_has"), field("error", "error_has"), choice("model", f.model), choice("environment", f.environment),
      choice("status", f.status), el("label", {}, "passed ", passed), el("label", {}, "sort ", sortBy),
      el("button", { type: "submit" }, "apply"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const next = { id: p.id, size: p.size }; // a new filter starts at the first page
      for (const input of form.querySelectorAll("[data-filter]")) next[input.name] = input.value;
      location.hash = link("/benchmark", next);
    });
    for (const select of form.querySelectorAll("select")) select.addEventListener("change", () => form.requestSubmit());
    return form;
  }

  function listState(p) {
    const out = {};
    for (const k of ["task_has", "error_has", "model", "environment", "status", "passed", "sort", "size"]) if (p[k]) out[k] = p[k];
    return out;
  }

  // The list a trial was opened from, at the page that lists it (``position``: its place
  // in the filtered order, which j/k walk past the page it was opened on).
  function listAt(p, position) {
    const out = listState(p);
    const page = position === null || position === undefined ? 0 : Math.floor(position / Number(p.size || PAGE_SIZE));
    if (page > 0) out.page = page;
    return out;
  }

  function trialList(id, p, list) {
    const keep = listState(p);
    const rows = list.rows.map((r) =>
      el("tr", { "data-href": trialLink(id, r.task_id, r.trial, keep) },
        el("td", {}, el("a", { href: link("/task", { id: id, task: r.task_id }) }, r.task_id)),
        el("td", { class: "n" }, el("a", { href: trialLink(id, r.task_id, r.trial, keep) }, "#" + r.trial)),
        el("td", {}, r.model || "–"), el("td", {}, r.environment),
        el("td", { class: "status-" + r.status }, r.status),
        el("td", { class: "err" }, r.error === null ? "" : r.error.slice(0, 160)),
        el("td", { class: "n" }, r.duration === null ? "–" : num(r.duration, 2) + " s"),
        el("td", { class: "n" }, num(r.tokens)),
        el("td", { class: "n" }, r.cost_text),
        el("td", { class: "n" }, r.score === null ? "–" : num(r.score, 3) + (r.passed ? " ✓" : " ✗"))));
    const page = Number(p.page || 0);
    const pages = Math.max(1, Math.ceil(list.total / list.size));
    const at = (n) => link("/benchmark", Object.assign({}, p, { page: n || "", tab: "" }));
    // A list that shrank under its page (a live filter, a kept link): say so, and lead
    // to its last page rather than step back one page at a time.
    if (!list.partial && page >= pages) {
      const pager = el("p", { class: "pager" }, "page " + (page + 1) + " is past the end of the list (" +
        num(pages) + (pages === 1 ? " page" : " pages") + " · " + num(list.total) + " trials) · ",
        el("a", { href: at(pages - 1), id: "last-page" }, "last page →"));
      return el("section", { id: "list" }, el("h2", {}, "Trials"), pager);
    }
    const pager = el("p", { class: "pager" },
      page > 0 ? el("a", { href: at(page - 1), id: "prev-page" }, "← previous") : null, " ",
      "page " + (page + 1) + " of " + (list.partial ? "…" : num(pages)) + " · " +
        num(list.total) + (list.partial ? " trials loaded so far of " + num(list.expected) : " trials"), " ",
      page + 1 < pages || list.partial ? el("a", { href: at(page + 1), id: "next-page" }, "next →") : null);
    const body = table(["task", "trial", "model", "environment", "status", "error", "duration", "tokens", "cost", "score"], rows, { id: "trials" });
    let selected = -1;
    const trs = Array.from(body.querySelectorAll("tbody tr"));
    keys = (event) => {
      if (!body.isConnected || body.closest("[hidden]")) return false; // another tab is shown
      if (event.key === "j" || event.key === "ArrowDown") selected = Math.min(trs.length - 1, selected + 1);
      else if (event.key === "k" || event.key === "ArrowUp") selected = Math.max(0, selected - 1);
      else if (event.key === "Enter" && selected >= 0) { location.hash = trs[selected].dataset.href; return true; }
      else return false;
      trs.forEach((tr, i) => tr.classList.toggle("selected", i === selected));
      if (trs[selected]) trs[selected].scrollIntoView({ block: "nearest" });
      return true;
    };
    return el("section", { id: "list" }, el("h2", {}, "Trials"), pager, body);
  }

  // pass@k by k with its 95% interval: over all tasks, and per model.
  function passKChart(s) {
    const key = s.metrics[0].key;
    const points = (sc) => Object.entries(sc[key] || {}).map(([k, e]) => ({ k: Number(k), value: e.value, low: e.low, high: e.high }));
    const series = [{ name: "all tasks", points: points(s.scores) }].concat(
      Object.entries(s.scores_by_model).map(([model, sc]) => ({ name: model, points: points(sc) })));
    return Charts.byK("chart-passk", s.metrics[0].name + " by k, with 95% intervals", series);
  }

  function errorsPanel(id, s) {
    const example = (e) => {
      const at = e.lastIndexOf("#");
      return el("a", { href: trialLink(id, e.slice(0, at), e.slice(at + 1)) }, e);
    };
    const groups = (title, list, more) => list.length ? [el("h2", {}, title), table(["count", "message", "examples"],
      list.map((g) => el("tr", {}, el("td", { class: "n" }, num(g.count)), el("td", { class: "err" }, fold(g.message)),
        el("td", {}, g.examples.map((e) => [example(e), " "])))), { class: "errors" }),
      more ? el("p", { class: "note" }, num(more) + " less frequent messages not listed: filter the trial list by status or error") : null] : [];
    const none = s.errors.length || s.evaluation_errors.length ? null : el("p", { class: "note" }, "no errors");
    return el("div", { id: "details" }, groups("Errors", s.errors, s.errors_more),
      groups("Failed evaluations", s.evaluation_errors, s.evaluation_errors_more), none);
  }

  function tasksPanel(id, s) {
    const tasks = s.tasks.map((t) => el("tr", {},
      el("td", {}, el("a", { href: link("/task", { id: id, task: t.task_id }) }, t.task_id)),
      el("td", {}, t.model || "–"), el("td", {}, t.environment),
      el("td", { class: "n" }, t.passed + " / " + t.trials),
      s.metrics.map((m) => el("td", {}, metricValues(m, t[m.key])))));
    return [el("h2", {}, "Tasks" + (s.tasks_total > s.tasks.length ? " (first " + s.tasks.length + " of " + num(s.tasks_total) + ")" : "")),
      table(["task", "model", "environment", "passed"].concat(s.metrics.map((m) => m.name)), tasks, { id: "tasks" })];
  }

  // A several-models run: each task with one column per model, its best marked.
  function modelsPanel(id, s) {
    const mv = s.models, first = s.metrics[0];
    const rate = (c) => (c && c.trials ? c.passed / c.trials : -1);
    // Own keys only: a model may be named "toString" (every object has one).
    const cell = (r, m) => (Object.hasOwn(r.models, m) ? r.models[m] : null);
    const rows = mv.rows.map((r) => {
      const best = Math.max(...mv.models.map((m) => rate(cell(r, m))));
      return el("tr", {}, el("td", {}, r.task), mv.models.map((m) => {
        const c = cell(r, m);
        if (!c) return el("td", { class: "n" }, "–");
        return el("td", { class: "n" + (rate(c) === best && mv.models.length > 1 ? " best" : "") },
          el("a", { href: link("/task", { id: id, task: c.task_id }) }, c.passed + " / " + c.trials),
          el("div", { class: "sub" }, metricValues(first, c[first.key])));
      }));
    });
    const means = el("tr", { class: "means" }, el("td", mv.mean_note ? { title: mv.mean_note } : {}, mv.mean_label),
      mv.models.map((m) => el("td", { class: "n" }, metricValues(first, mv.means[m][first.key]))));
    const pick = (name, chosen) => el("select", { name: name, "aria-label": name },
      mv.models.map((m) => el("option", { value: m, selected: m === chosen }, m)));
    const a = pick("ma", mv.models[0]);
    const b = pick("mb", mv.models[1]);
    const go = el("button", { type: "button", id: "compare-models",
      onclick: () => { location.hash = link("/compare", { a: id, b: id, ma: a.value, mb: b.value }); } }, "compare");
    return [
      el("p", { class: "compare" }, "Compare model A ", a, " (baseline) with model B ", b, " on the same tasks ", go),
      el("h2", {}, "Tasks by model" + (mv.tasks_total > mv.rows.length ? " (first " + mv.rows.length + " of " + num(mv.tasks_total) + ")" : "")),
      table(["task"].concat(mv.models), [rows, means], { id: "models" }),
    ];
  }

  function chartsPanel(s) {
    const ch = s.charts;
    const shownTasks = s.tasks.slice(0, 60);
    return el("div", { class: "charts" },
      Charts.bars("chart-tasks", "Pass rate per task" + (s.tasks_total > shownTasks.length ? " (first " + shownTasks.length + " of " + num(s.tasks_total) + ")" : ""),
        shownTasks.map((t) => ({ label: t.task_id, value: t.trials ? t.passed / t.trials : null, note: t.passed + " / " + t.trials }))),
      Charts.histogram("chart-pass-rate", "Tasks by pass rate", ch.pass_rate, "", 2),
      Charts.histogram("chart-score", "Score per trial", ch.score, "", 2),
      Charts.histogram("chart-duration", "Latency per trial (seconds)", ch.duration, " s", 2),
      Charts.histogram("chart-tokens", "Tokens per trial", ch.tokens, "", 0));
  }

  // A task's or trial's page is redrawn when a finished benchmark's data changes; of a
  // live one, given ``shown`` (its answer's part the page draws, null once it is final),
  // when that changes.
  async function watched(p, name, params, shown) {
    const [page, v] = await Promise.all([get(name, params), EXPORT ? null : get("version", { id: p.id })]);
    if (v && !v.live) watch(p.id, v.version);
    else if (v && shown && shown(page) !== null) follow(name, params, shown, shown(page));
    if (v) noteVersion(p.id, v.version);
    return page;
  }

  // A live benchmark's trial page (the trial running, or not started yet): asked again
  // every 3 s, redrawn once what it shows changed, not otherwise
  // (a live benchmark's version changes at every reload: a redraw closes what was opened).
  function follow(name, params, shown, seen) {
    const mine = generation;
    timer = setTimeout(async () => {
      if (mine !== generation) return;
      let now = seen;
      try { now = shown(await get(name, params)); } catch (error) { /* asked again */ }
      if (mine !== generation) return;
      if (now !== seen) later(0);
      else follow(name, params, shown, seen);
    }, 3000);
  }

  // A task's limits, those it sets ("· max_iterations 10 · cost_limit 0.5").
  function limits(m) {
    return ["max_iterations", "token_limit", "cost_limit", "working_time_limit"]
      .filter((name) => m[name] !== null && m[name] !== undefined).map((name) => " · " + name + " " + m[name]).join("");
  }

  async function taskPage(p) {
    // Not followed while live: the page reads the history of each of its trials (100 at most).
    const t = await watched(p, "task", { id: p.id, task: p.task }, null);
    document.getElementById("where").textContent = p.id;
    const m = t.metadata;
    const taskLinks = (ids) => ids.length ? ids.map((x) => [el("a", { href: link("/task", { id: p.id, task: x }) }, x), " "]) : "none";
    const rows = t.trials.map((x) => el("tr", {},
      el("td", {}, el("a", { href: trialLink(p.id, t.task_id, x.trial) }, "#" + x.trial)),
      el("td", {}, x.row ? x.row.status : "not started"),
      el("td", { class: "n" }, x.row && x.row.score !== null ? num(x.row.score, 3) + (x.row.passed ? " ✓" : " ✗") : "–"),
      el("td", { class: "err" }, x.row && x.row.error ? x.row.error.slice(0, 160) : ""),
      el("td", {}, x.previous === null || x.previous === undefined ? "–"
        : el("a", { href: trialLink(p.id, t.task_id, x.previous) }, "saw trial #" + x.previous))));
    return [
      el("p", {}, el("a", { href: link("/benchmark", { id: p.id }) }, "← " + p.id)),
      el("h1", {}, t.task_id, " ", updatedMark(p.id)),
      el("p", {}, "agent " + m.agent_id + " · environment " + m.environment_id + " · model " + (m.model || "–") + limits(m)),
      el("p", {}, "parents: ", taskLinks(t.parents)), el("p", {}, "children: ", taskLinks(t.children)),
      t.metrics.map((m, i) => el("p", { class: i ? null : "big" }, metricValues(m, t[m.key]))),
      el("h2", {}, "Inputs"), fold(m.inputs),
      el("h2", {}, "Trials by round (the reflective chain: whose evaluation each trial saw)"),
      table(["trial", "status", "score", "error", "previous"], rows, { id: "rounds" }),
      t.more_trials ? el("p", { class: "note" }, t.more_trials + " more trials: see the trial list") : null,
    ];
  }

  // A model call in the timeline: its summary, a link to its place in the transcript,
  // and its stored payload fetched only when opened (an export leaves it out).
  function modelCallStep(c, where) {
    const pl = c.payload || {};
    const parts = ["model " + (pl.model || "?")];
    if (pl.latency !== null && pl.latency !== undefined) parts.push(num(pl.latency, 2) + " s");
    parts.push(num(pl.input_tokens) + " in / " + num(pl.output_tokens) + " out tokens");
    parts.push(num(pl.messages) + " new message(s)");
    if (pl.tool_calls) parts.push(pl.tool_calls + " tool call(s): " + pl.tools.join(", ") + (pl.tool_calls > pl.tools.length ? ", …" : ""));
    if (pl.failed) parts.push(pl.failed + (pl.failed === 1 ? " failed try" : " failed tries"));
    if (pl.finish_reason) parts.push(pl.finish_reason);
    const go = el("a", { href: "", class: "to-call" }, "in the transcript ↑");
    go.addEventListener("click", (event) => {
      event.preventDefault();
      const target = document.getElementById("call-" + c.seq);
      if (target) target.scrollIntoView({ block: "start" });
    });
    const raw = el("div", {});
    const box = el("details", { class: "raw-commit" }, el("summary", {}, "raw JSON (" + num(pl.bytes) + " bytes)"), raw);
    box.addEventListener("toggle", async () => {
      if (!box.open || raw.firstChild) return;
      if (EXPORT) { raw.append(el("p", { class: "note" }, "an export leaves the stored record out: corral view serves it, corral show ID TASK TRIAL --json prints it")); return; }
      try {
        raw.append(fold((await get("commit", Object.assign({ seq: c.seq }, where))).payload));
      } catch (err) {
        raw.append(el("p", { class: "err" }, String(err.message || err)));
      }
    });
    return [el("div", { class: "tool" }, parts.join(" · "), " ", go), pl.error ? fold(pl.error) : null, box];
  }

  function step(c, where) {
    const body = [];
    const pl = c.payload || {};
    if (c.kind === "setup") body.push(el("div", {}, "initial state"), fold(pl.state),
      pl.previous_trial === null || pl.previous_trial === undefined ? null : el("div", {}, "saw trial #" + pl.previous_trial));
    else if (c.kind === "model_call") body.push(modelCallStep(c, where));
    else if (c.kind === "action") body.push(el("div", { class: "tool" }, "tool " + pl.tool + (pl.index ? " (parallel #" + pl.index + ")" : "")), fold(pl.arguments));
    else if (c.kind === "tool_effect") {
      body.push(el("div", {}, "observation"), fold(pl.observation));
      if (c.diff && c.diff.length) {
        body.push(el("div", {}, "state changes"), table(["path", "change", "before", "after"],
          c.diff.map((d) => el("tr", {}, el("td", {}, d.path), el("td", {}, d.op),
            el("td", {}, "before" in d ? fold(d.before) : ""), el("td", {}, "after" in d ? fold(d.after) : "")))),
          c.diff_more ? el("div", { class: "note" }, c.diff_more + " more changes") : null);
      }
    } else if (c.kind === "terminal") {
      body.push(el("div", { class: "status-" + pl.status }, "status " + pl.status + " · attempts " + pl.attempts));
      if (pl.error) body.push(el("div", { class: "err" }, "error"), fold(pl.error));
      if (pl.traceback) body.push(el("div", {}, "traceback"), fold(pl.traceback));
      body.push(el("div", {}, "output"), fold(pl.output));
    } else if (c.kind === "usage") {
      // Landed as the run was cancelled: what no model call's commit carried.
      const spent = c.usage ? "spent " + num(c.usage.input_tokens) + " in / " + num(c.usage.output_tokens) + " out tokens, cost " + c.usage.cost_text + " without a model call" : "nothing spent";
      const failed = (pl.failed_attempts || []).length;
      body.push(el("div", {}, "run cancelled · " + spent + (failed ? " · " + failed + " failed attempt(s) recorded" : "")));
    } else if (c.kind === "evaluation") {
      // A rescore of the earlier attempt a rerun left counted names the terminal it scored.
      const of = typeof pl.terminal_seq === "number" ? " · of the terminal #" + pl.terminal_seq : "";
      if ("passed" in pl) body.push(el("div", {}, "score " + pl.score + " · " + (pl.passed ? "passed" : "failed") + of), fold(pl.details || {}));
      else body.push(el("div", { class: "err" }, "evaluation failed"), fold(pl.error));
    } else body.push(fold(pl));
    const usage = c.usage ? " · " + num(c.usage.input_tokens) + " in / " + num(c.usage.output_tokens) + " out tokens, cost " + c.usage.cost_text : "";
    return el("li", { class: "commit kind-" + c.kind },
      el("div", { class: "head" }, "#" + c.seq + " " + c.kind + " · +" + num(c.since_start, 3) + " s (gap " + num(c.gap, 3) + " s)" + usage),
      body);
  }

  // -- the transcript: a trial's model calls as a chat ---------------------------------
  const ROLES = ["system", "user", "assistant", "tool"];

  function toolCalls(calls) {
    return (calls || []).map((tc) => el("div", { class: "tool-call" },
      el("span", { class: "tool-name" }, "→ " + tc.name), fold(tc.arguments)));
  }

  function reasoning(value) {
    if (!value) return null;
    return el("details", { class: "reasoning" }, el("summary", {}, "reasoning (" + num(value.length) + " characters)"), el("pre", {}, value));
  }

  function chatMessage(m) {
    const role = ROLES.includes(m.role) ? m.role : "other";
    const who = m.role === "tool" ? "tool result" + (m.name ? " · " + m.name : "") : m.role;
    return el("div", { class: "msg role-" + role },
      el("div", { class: "who" }, who),
      reasoning(m.reasoning),
      m.pieces ? m.pieces.map(piece)
        : m.text_parts ? interleaved(m.text_parts, m.tool_calls) : [m.text ? fold(m.text) : null, toolCalls(m.tool_calls)]);
  }

  // A piece of a reply that used a server tool (a web search): its text, a call of the
  // trial's tools, or the server tool's use or result, in the order it was written.
  function piece(p) {
    if (p.kind === "text") return p.text ? fold(p.text) : null;
    if (p.kind === "call") return toolCalls([{ name: p.name, arguments: p.text }]);
    return el("div", { class: "server-tool" }, el("span", { class: "tool-name" }, "⚙ " + p.name), fold(p.text));
  }

  // A reply's text with each tool call where it wrote it (parts[i] before call i, the
  // last part after them all).
  function interleaved(parts, calls) {
    return parts.map((part, i) => [part ? fold(part) : null, i < calls.length ? toolCalls([calls[i]]) : null]);
  }

  function failedTry(f) {
    const parts = [f.label];
    if (f.status !== null && f.status !== undefined) parts.push("HTTP " + f.status);
    if (f.retry_after !== null && f.retry_after !== undefined) parts.push("told to wait " + num(f.retry_after, 2) + " s");
    if (f.waited !== null && f.waited !== undefined) parts.push("waited " + num(f.waited, 2) + " s");
    return el("div", { class: "msg failed-try" }, el("div", { class: "who" }, "✗ failed try · " + parts.join(" · ")), fold(f.error));
  }

  // ``earlier``: a scorer call of an earlier attempt (a rescore while a rerun was unfinished).
  function callHead(c, i, earlier) {
    const parts = [(c.scorer ? "scorer call " : "call ") + (i + 1) + (earlier ? " of attempt " + c.attempt : ""), c.model || "model ?"];
    if (c.latency !== null && c.latency !== undefined) parts.push(num(c.latency, 2) + " s");
    parts.push(num(c.input_tokens) + " in / " + num(c.output_tokens) + " out tokens");
    if (c.cache_read_tokens || c.cache_write_tokens) parts.push("cache " + num(c.cache_read_tokens) + " read / " + num(c.cache_write_tokens) + " written");
    if (c.cost) parts.push("cost " + c.cost_text);
    if (c.failed.length) parts.push(c.failed.length + " failed " + (c.failed.length === 1 ? "try" : "tries"));
    if (c.truncated) parts.push(c.truncated + " value(s) truncated");
    // Why the reply ended: one the provider cut at its token limit ("length",
    // "max_tokens") must not read as whole.
    if (c.reply && c.reply.finish_reason) parts.push("stopped: " + c.reply.finish_reason);
    return el("div", { class: "call-head", title: c.endpoint || "" }, parts.join(" · "));
  }

  // A reply's text; one with neither text nor a tool call says so, as corral show does.
  function replyText(r) {
    return r.text || ((r.tool_calls || []).length ? "" : "(no text)");
  }

  // Where a reopened trial (--rerun, --retry-errors) starts a fresh transcript.
  function attemptHead(a) {
    return el("div", { class: "attempt", id: "attempt-" + a.attempt }, "attempt " + a.attempt +
      (a.seq === null ? "" : " (" + (a.reason || "reopened") + " at " + when(a.created_at) + " UTC" +
        (a.previous_status ? ", after an attempt that ended " + a.previous_status : "") + ")"));
  }

  function transcriptView(entries) {
    const calls = (entries || []).filter((c) => c.kind !== "attempt");
    if (!calls.length && !(entries || []).length) return el("p", { class: "note", id: "transcript" }, "no model calls recorded (an agent records them through session.chat(model) or session.record_model_call)");
    const out = entries.some((c) => c.kind === "attempt") ? [attemptHead({ attempt: 1, seq: null })] : [];
    let number = 0;
    let attempt = 1;
    const judged = {}; // scorer calls so far, by the attempt they scored
    for (const c of entries) {
      if (c.kind === "attempt") { number = 0; attempt = c.attempt; out.push(attemptHead(c)); continue; }
      const n = c.scorer ? (judged[c.attempt] = (judged[c.attempt] || 0) + 1) - 1 : number++;
      const id = c.scorer ? "scorer-call-" + c.seq + "-" + n : "call-" + c.seq;
      out.push(el("section", { class: "call" + (c.scorer ? " scorer" : "") + (c.failed.length ? " has-failed" : ""), id: id },
        callHead(c, n, c.scorer && c.attempt !== attempt),
        c.messages.map(chatMessage),
        c.failed.map(failedTry),
        c.reply ? chatMessage(Object.assign({ role: "assistant" }, c.reply, { text: replyText(c.reply) }))
          : el("div", { class: "msg gave-up" }, el("div", { class: "who" }, "gave up"), fold(c.error))));
    }
    if (!calls.length) out.push(el("p", { class: "note" }, "no model calls recorded in this attempt"));
    return el("div", { id: "transcript" }, out);
  }

  async function trialPage(p) {
    // Followed until it ends (a live benchmark may stay so, stopped midway, for good).
    const t = await watched(p, "trial", p, (x) => x.row && !["running", "scoring"].includes(x.row.status)
      ? null : JSON.stringify([x.row, x.timeline.length]));
    document.getElementById("where").textContent = p.id;
    const keep = listState(p);
    const back = listAt(p, t.position);
    const nav = (x, label, idName) => x ? el("a", { href: trialLink(p.id, x.task_id, x.trial, keep), id: idName }, label) : null;
    keys = (event) => {
      const to = event.key === "j" || event.key === "ArrowRight" ? t.next
        : event.key === "k" || event.key === "ArrowLeft" ? t.previous : undefined;
      if (to) { location.hash = trialLink(p.id, to.task_id, to.trial, keep); return true; }
      if (event.key === "u" || event.key === "Escape") { location.hash = link("/benchmark", Object.assign({ id: p.id }, back)); return true; }
      return false;
    };
    const items = [];
    let attempt = 1;
    for (const c of t.timeline) {
      if (c.attempt !== attempt || (c.seq === t.timeline[0].seq && t.timeline.some((x) => x.attempt > 1))) {
        attempt = c.attempt;
        items.push(el("li", { class: "attempt" }, "attempt " + attempt));
      }
      items.push(step(c, { id: p.id, task: t.task_id, trial: t.trial }));
    }
    const parents = Object.entries(t.parents).map(([id, r]) => el("li", {},
      el("a", { href: link("/task", { id: p.id, task: id }) }, id), ": " + (r.status || "not finished") + " → ", fold(r.output)));
    return [
      el("p", {}, el("a", { href: link("/benchmark", Object.assign({ id: p.id }, back)) }, "← trial list"), " ",
        nav(t.previous, "← previous (k)", "previous-trial"), " ", nav(t.next, "next (j) →", "next-trial"),
        t.position === null ? "" : " · " + (t.position + 1) + " of " + num(t.listed)),
      el("h1", {}, el("a", { href: link("/task", { id: p.id, task: t.task_id }) }, t.task_id), " #" + t.trial, " ", updatedMark(p.id)),
      el("p", {}, "agent " + t.metadata.agent_id + " · environment " + t.metadata.environment_id + " · model " + (t.metadata.model || "–") + limits(t.metadata)),
      el("details", { id: "task-inputs" }, el("summary", {}, "the task's inputs"), fold(t.metadata.inputs)),
      t.row ? el("p", { id: "outcome", class: "big" }, el("span", { class: "status-" + t.row.status }, t.row.status),
        t.row.score === null ? "" : " · score " + num(t.row.score, 3) + (t.row.passed ? " (passed)" : " (failed)"),
        t.row.duration === null ? "" : " · " + num(t.row.duration, 2) + " s",
        " · " + num(t.row.tokens) + " tokens · cost " + t.row.cost_text + " · " + num(t.row.commits) + " commits" +
        (t.row.attempts > 1 ? " · " + t.row.attempts + " attempts" : "")) : el("p", { id: "outcome" }, "not started"),
      parents.length ? el("ul", {}, parents) : null,
      el("div", { class: "trial-views" },
        el("div", { class: "view-transcript" }, el("h2", {}, "Transcript"), transcriptView(t.transcript)),
        el("div", { class: "view-timeline" }, el("h2", {}, "Timeline"), el("ol", { id: "timeline" }, items))),
      el("details", { id: "raw" }, el("summary", {}, "raw JSON"),
        fold(t.timeline.map((c) => ({ seq: c.seq, kind: c.kind, created_at: c.created_at, usage: c.usage, payload: c.payload })))),
    ];
  }

  async function comparePage(p) {
    const c = await get("compare", { a: p.a, b: p.b, ma: p.ma || "", mb: p.mb || "" });
    const name = (id, model) => id + (model ? " · model " + model : "");
    document.getElementById("where").textContent = name(p.a, p.ma) + " vs " + name(p.b, p.mb);
    const side = (id, x) => el("td", {}, el("a", { href: link("/task", { id: id, task: x.task_id }) }, x.passed + " / " + x.trials), " ", passAtK(x.pass_at_k));
    const rows = c.tasks.map((t) => el("tr", { class: "outcome-" + t.outcome },
      el("td", {}, t.task_id), side(c.a, t.a), side(c.b, t.b), el("td", {}, t.outcome)));
    const est = (e) => num(e.value, 3) + " [" + num(e.low, 3) + ", " + num(e.high, 3) + "]";
    const named = c.named || [];
    const means = c.paired.concat(named).map((x) => el("tr", {}, el("td", {}, x.metric), el("td", { class: "n" }, num(x.shared)),
      el("td", { class: "n" }, est(x.a)), el("td", { class: "n" }, est(x.b)), el("td", { class: "n" }, est(x.difference))));
    const points = (side) => c.paired.map((x) => ({ k: x.k, value: x[side].value, low: x[side].low, high: x[side].high }));
    const where = (id, model) => [el("a", { href: link("/benchmark", { id: id }) }, id), model ? " · model " + model : ""];
    return [
      el("h1", {}, c.model_a && c.a === c.b ? "Compare models: B against A" : "Compare: B against A"),
      el("p", {}, "A: ", where(c.a, c.model_a), " · B: ", where(c.b, c.model_b)),
      el("p", {}, c.shared + " shared tasks (" + c.only_a + " only in A, " + c.only_b + " only in B); each task's outcome by pass@" + (c.k_values[0] || "–")),
      c.paired.length ? c.paired.map(paired) : el("p", { class: "note" }, "no shared task has enough finished trials to compare"),
      named.map(paired),
      c.paired.length || named.length ? el("div", { class: "side" },
        table(["metric", "tasks", "A mean [95%]", "B mean [95%]", "B − A [95%]"], means, { id: "means" }),
        c.paired.length ? Charts.byK("chart-compare", "pass@k by k: each side's mean over the shared tasks", [
          { name: "A: " + name(c.a, c.model_a), points: points("a") }, { name: "B: " + name(c.b, c.model_b), points: points("b") }]) : null) : null,
      c.tasks.length < c.shared ? el("p", { class: "note", id: "compared-shown" }, c.tasks.length + " of the " +
        num(c.shared) + " shared tasks listed: those whose outcome changed first (regressed, then improved)") : null,
      table(["task", "A passed · pass@k", "B passed · pass@k", "B against A"], rows, { id: "compared" }),
    ];
  }

  // The paired comparison (corral.compare): B − A on the shared tasks, with its interval.
  function paired(x) {
    const d = x.difference;
    return el("p", { class: "big paired", id: "paired-" + (x.metric.startsWith("score:") ? x.metric : x.k) }, "B − A on " + x.metric + ": " + num(d.value, 3) +
      " [" + num(d.low, 3) + ", " + num(d.high, 3) + "]" + (x.significant ? " (significant)" : " (not significant)") +
      " · improved " + num(x.improved) + " · regressed " + num(x.regressed) + " · tied " + num(x.tied));
  }

  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (!keys || event.ctrlKey || event.metaKey || event.altKey) return;
    if (target && ["INPUT", "SELECT", "TEXTAREA"].includes(target.tagName)) return;
    if (keys(event)) event.preventDefault();
  });
  window.addEventListener("hashchange", render);
  render();
})();
