// Baton execution viewer: vanilla JS, no framework, no network but this API.
// The API key lives in sessionStorage only (never in a URL, a cookie or a log line).
"use strict";

(function () {
  const KEY = "baton.apiKey";
  const API = new URL("../v1/", window.location.href);
  const ACTIVE = new Set(["RUNNING", "PAUSED"]);
  const STATUSES = ["RUNNING", "PAUSED", "COMPLETED", "FAILED", "TIMED_OUT", "CANCELLED"];
  const STEP_PAGE = 1000; // step executions per /steps page
  const STEP_CAP = 5000; // loaded before asking the user for more
  const ROWS_PER_STEP = 20; // timeline rows shown per step before collapsing
  let refreshTimer = null;
  let view = { token: 0 };

  // --- small DOM helpers ------------------------------------------------------------------------
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else if (k === "text") el.textContent = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  const SVG = "http://www.w3.org/2000/svg";
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, String(v));
    }
    for (const c of children.flat(Infinity)) if (c) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return el;
  }
  const main = () => document.getElementById("main");
  // A run read back from the S3 archive (its retention passed): readable, not changeable.
  function archivedBadge(run) {
    return run.archived ? h("span", { class: "archived", "data-archived": "true", title: `archived ${when(run.archivedAt)}`, text: "archived" }) : null;
  }
  function statusBadge(st) {
    return h("span", { class: `status st-${st || "NONE"}`, "data-status": st || "NONE" }, st || "not run");
  }
  function when(t) {
    if (!t) return "";
    const d = new Date(t);
    return isNaN(d) ? String(t) : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  }
  function ms(a, b) {
    if (!a) return "";
    const d = (b ? new Date(b) : new Date()) - new Date(a);
    if (d < 1000) return `${d} ms`;
    if (d < 60000) return `${(d / 1000).toFixed(1)} s`;
    return `${Math.floor(d / 60000)} min ${Math.round((d % 60000) / 1000)} s`;
  }
  function json(v) { return JSON.stringify(v, null, 2); }
  function qs(params) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") p.set(k, v);
    const out = p.toString();
    return out ? `?${out}` : "";
  }

  // --- errors and the key -----------------------------------------------------------------------
  class ApiError extends Error {
    constructor(status, title, detail) {
      super(`${title}: ${detail}`);
      this.status = status; this.title = title; this.detail = detail;
    }
  }
  function showError(err) {
    const box = document.getElementById("error");
    box.replaceChildren();
    if (!err) { box.hidden = true; return; }
    if (err instanceof ApiError) {
      box.append(h("strong", { text: `${err.title} (${err.status})` }), h("span", { text: err.detail || "" }));
    } else {
      box.append(h("strong", { text: "Error" }), h("span", { text: String(err.message || err) }));
    }
    box.hidden = false;
  }
  function apiKey() { return window.sessionStorage.getItem(KEY); }

  async function api(path, opts) {
    const key = apiKey();
    const headers = { accept: "application/json" };
    if (key) headers["x-api-key"] = key;
    let body;
    if (opts && opts.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(opts.body);
    }
    let resp;
    try {
      resp = await fetch(new URL(path.replace(/^\//, ""), API), {
        method: (opts && opts.method) || "GET", headers, body, credentials: "omit", cache: "no-store",
      });
    } catch (e) {
      throw new ApiError(0, "Network error", String(e.message || e));
    }
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
    if (!resp.ok) {
      const title = (data && data.title) || resp.statusText || "Request failed";
      const detail = (data && data.detail) || text.slice(0, 300);
      const err = new ApiError(resp.status, title, detail);
      if (resp.status === 401 || resp.status === 403) {
        window.sessionStorage.removeItem(KEY);
        keyPrompt(err);
      }
      throw err;
    }
    return data;
  }

  function keyPrompt(err) {
    stopRefresh();
    document.getElementById("forget-key").hidden = true;
    const input = h("input", { id: "api-key", type: "password", autocomplete: "off", required: true, "aria-describedby": "key-help" });
    const form = h("form", { class: "key-form", "aria-labelledby": "key-title" },
      h("h2", { id: "key-title", text: "API key" }),
      h("p", { id: "key-help", class: "muted", text: "Every request this page makes carries your Baton API key (header x-api-key). It is kept in this tab's session storage only." }),
      h("div", { id: "key-where", class: "key-where" },
        h("p", {}, h("strong", { text: "Where is the key? " }),
          "A local server (", h("code", { text: "make dev" }), " or ", h("code", { text: "baton dev" }), ") prints it at every start, on the ",
          h("code", { text: "API key" }), " line of its banner, and keeps it in the file ",
          h("code", { text: ".baton/data/api-key" }), " under the directory it was started in (",
          h("code", { text: "$BATON_DATA_DIR/api-key" }), " if that is set):"),
        h("pre", { class: "mono", text: "cat .baton/data/api-key" }),
        h("p", {}, "Unless ", h("code", { text: "BATON_API_KEY" }), " chose it: then it is that value. In AWS, it is an API key of the stack (API Gateway console, or ",
          h("code", { text: "aws apigateway get-api-key --api-key ID --include-value" }), ").")),
      h("label", { for: "api-key", text: "API key" }), input,
      h("p", {}, h("button", { type: "submit", class: "primary", id: "key-submit", text: "Use this key" })));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      window.sessionStorage.setItem(KEY, input.value.trim());
      showError(null);
      route();
    });
    main().replaceChildren(form);
    if (err) showError(err);
    input.focus();
  }

  // --- refresh --------------------------------------------------------------------------------
  function stopRefresh() { if (refreshTimer) { clearTimeout(refreshTimer); refreshTimer = null; } }
  function refreshIn(secs, fn) {
    stopRefresh();
    refreshTimer = setTimeout(() => {
      if (document.hidden) { refreshIn(secs, fn); return; }
      fn();
    }, secs * 1000);
  }

  // --- router -----------------------------------------------------------------------------------
  async function route() {
    stopRefresh();
    const token = ++view.token;
    const hash = window.location.hash.replace(/^#/, "") || "/";
    const parts = hash.split("?")[0].split("/").filter(Boolean).map(decodeURIComponent);
    const section = parts[0] || "runs";
    for (const a of document.querySelectorAll("[data-nav]")) {
      if (a.dataset.nav === section) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
    if (!apiKey()) { view.shown = null; keyPrompt(null); return; }
    document.getElementById("forget-key").hidden = false;
    showError(null);
    // Another page than the one shown: nothing of the old one stays while the new one loads.
    const shown = hash.split("?")[0];
    if (view.shown !== shown) {
      view.shown = shown;
      main().replaceChildren(h("p", { class: "muted", id: "loading", role: "status", text: "Loading…" }));
    }
    try {
      if (section === "runs" && parts[1]) await runPage(parts[1], token, false);
      else if (section === "runs") await runsPage(new URLSearchParams(hash.split("?")[1] || ""), token, false);
      else if (section === "definitions" && parts[1]) await definitionPage(parts[1], parts[2], token);
      else if (section === "definitions") await definitionsPage(token);
      else if (section === "queues" && parts[1]) await queuePage(parts[1], token);
      else if (section === "queues") await queuesPage(token);
      else if (section === "schedules" && parts[1]) await schedulePage(parts[1], token, false);
      else if (section === "schedules") await schedulesPage(new URLSearchParams(hash.split("?")[1] || ""), token);
      else main().replaceChildren(h("h2", { id: "not-found", text: "Not found" }), h("p", {}, h("a", { href: "#/", text: "Back to runs" })));
    } catch (e) {
      failed(e, token, section, parts[1]);
    }
  }
  // A page that could not be loaded (or refreshed) says so in place of its content: an unknown
  // id is a not-found page, anything else the API's problem with a way to try again.
  const NOUN = { runs: "run", definitions: "definition", queues: "queue", schedules: "schedule" };
  function failed(e, token, section, id) {
    if (!current(token) || (e instanceof ApiError && (e.status === 401 || e.status === 403))) return;
    stopRefresh();
    view.shown = null;
    if (e instanceof ApiError && e.status === 404 && id && NOUN[section]) {
      const noun = NOUN[section];
      main().replaceChildren(
        h("h2", { id: "not-found", text: `No such ${noun}` }),
        h("p", {}, `There is no ${noun} `, h("span", { class: "mono", id: "not-found-id", text: id }),
          " on this server: the id may be mistyped, or the " + noun + " was deleted."),
        h("p", { class: "muted", text: `${e.title} (${e.status}): ${e.detail || ""}` }),
        h("p", {}, h("a", { href: `#/${section === "runs" ? "" : section}`, text: `Back to the ${section}` })));
      return;
    }
    main().replaceChildren(h("h2", { id: "load-failed", text: "This page could not be loaded" }),
      h("p", {}, h("button", { type: "button", text: "Try again", onclick: () => route() })));
    showError(e);
  }
  const current = (token) => token === view.token;

  // --- runs list --------------------------------------------------------------------------------
  // A datetime-local value (the browser's local time) as the ISO-8601 instant the API takes.
  const isoOf = (local) => {
    if (!local) return "";
    const t = new Date(local);
    return Number.isNaN(t.getTime()) ? "" : t.toISOString();
  };
  async function runsPage(params, token, quiet) {
    const filters = {
      definitionName: params.get("definitionName") || "",
      status: params.get("status") || "",
      correlationId: params.get("correlationId") || "",
      archived: params.get("archived") === "true" ? "true" : "",
      from: params.get("from") || "",
      to: params.get("to") || "",
      pageToken: params.get("pageToken") || "",
    };
    const [page, defs] = await Promise.all([
      api(`instances${qs({ limit: 50, ...searchOf(filters), pageToken: filters.pageToken })}`),
      api("definitions?limit=100").catch(() => ({ definitions: [] })),
    ]);
    if (!current(token)) return;
    // The time range is searched by the API (createdAfter inclusive, createdBefore exclusive).
    const runs = page.instances || [];
    const setHash = (over) => {
      const p = { ...filters, ...over };
      window.location.hash = `#/runs${qs(p)}`;
    };
    const field = (name, label, el) => h("label", { for: `f-${name}` }, label, el);
    const defSelect = h("select", { id: "f-definitionName", name: "definitionName" },
      h("option", { value: "", text: "any" }),
      (defs.definitions || []).map((d) => h("option", { value: d.name, selected: d.name === filters.definitionName, text: d.name })));
    const statusSelect = h("select", { id: "f-status", name: "status" },
      h("option", { value: "", text: "any" }),
      STATUSES.map((st) => h("option", { value: st, selected: st === filters.status, text: st })));
    const form = h("form", { class: "filters", role: "search", "aria-label": "Search runs" },
      field("definitionName", "Definition", defSelect),
      field("status", "Status", statusSelect),
      field("correlationId", "Correlation id", h("input", { id: "f-correlationId", name: "correlationId", value: filters.correlationId })),
      field("from", filters.archived ? "Ended from" : "Created from", h("input", { id: "f-from", name: "from", type: "datetime-local", value: filters.from })),
      field("to", filters.archived ? "Ended before" : "Created before", h("input", { id: "f-to", name: "to", type: "datetime-local", value: filters.to })),
      field("archived", "Archived runs", h("input", { id: "f-archived", name: "archived", type: "checkbox", value: "true", checked: !!filters.archived })),
      h("button", { type: "submit", class: "primary", text: "Search" }));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const fd = new FormData(form);
      setHash({ definitionName: fd.get("definitionName"), status: fd.get("status"), correlationId: fd.get("correlationId"), from: fd.get("from"), to: fd.get("to"), archived: fd.get("archived") || "", pageToken: "" });
    });
    const counts = h("ul", { class: "counts", "aria-label": "Runs by status" });
    const rows = runs.map((r) => h("tr", { "data-run": r.id, "data-status": r.status },
      h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(r.id)}`, class: "mono", text: r.id })),
      h("td", {}, r.definitionName, r.definitionVersion ? ` v${r.definitionVersion}` : ""),
      h("td", {}, statusBadge(r.status), archivedBadge(r)),
      h("td", { class: "mono", text: r.correlationId || "" }),
      h("td", { text: when(r.createdAt) }),
      h("td", { text: ms(r.createdAt, r.completedAt || (ACTIVE.has(r.status) ? null : r.updatedAt)) })));
    const table = h("table", { id: "runs" },
      h("caption", { class: "muted", text: `${runs.length} run(s) on this page` }),
      h("thead", {}, h("tr", {}, ["Run", "Definition", "Status", "Correlation id", "Created", "Duration"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 6, class: "muted", text: "No runs match." }))));
    const prevTokens = (params.get("prev") || "").split(",").filter(Boolean);
    const pager = h("div", { class: "pager" },
      h("button", { type: "button", disabled: !filters.pageToken, text: "First page", onclick: () => setHash({ pageToken: "" }) }),
      h("button", { type: "button", id: "next-page", disabled: !page.nextPageToken, text: "Next page", onclick: () => setHash({ pageToken: page.nextPageToken, prev: [...prevTokens, filters.pageToken].join(",") }) }));
    if (!quiet) {
      main().replaceChildren(h("h2", { text: "Runs" }), form, counts, table, pager);
    } else {
      const old = document.getElementById("runs");
      if (old) old.replaceWith(table);
      const oldCounts = document.querySelector("ul.counts");
      if (oldCounts) oldCounts.replaceWith(counts);
    }
    loadCounts(counts, filters, token, setHash);
    if (runs.some((r) => ACTIVE.has(r.status))) refreshIn(5, () => runsPage(params, token, true).catch((e) => failed(e, token, "runs")));
  }

  // The API's search parameters: the database by creation time, or the archive by end time.
  function searchOf(filters) {
    const common = { status: filters.status, definitionName: filters.definitionName, correlationId: filters.correlationId };
    return filters.archived
      ? { ...common, archived: "true", from: isoOf(filters.from), to: isoOf(filters.to) }
      : { ...common, createdAfter: isoOf(filters.from), createdBefore: isoOf(filters.to) };
  }

  async function loadCounts(list, filters, token, setHash) {
    // No count endpoint: one page of 100 per status (shown as 100+ when there are more).
    const results = await Promise.all(STATUSES.map((st) =>
      api(`instances${qs({ limit: 100, ...searchOf(filters), status: st })}`)
        .then((p) => [st, (p.instances || []).length, !!p.nextPageToken]).catch(() => [st, "?", false])));
    if (!current(token)) return;
    list.replaceChildren(...results.map(([st, n, more]) => h("li", {},
      h("button", { type: "button", "data-count": st, "aria-pressed": String(filters.status === st), onclick: () => setHash({ status: filters.status === st ? "" : st, pageToken: "" }) },
        statusBadge(st), h("span", { text: `${n}${more ? "+" : ""}` })))));
  }

  // --- a run ------------------------------------------------------------------------------------
  async function loadSteps(id, inst) {
    // Small runs come with their steps; big ones are paged through /steps.
    if (Array.isArray(inst.steps) && !inst.stepsTruncated) return { steps: inst.steps, more: null };
    return loadStepPages(id, null, []);
  }
  async function loadStepPages(id, pageToken, acc) {
    let token = pageToken;
    do {
      const page = await api(`instances/${encodeURIComponent(id)}/steps${qs({ limit: STEP_PAGE, pageToken: token })}`);
      acc.push(...(page.steps || []));
      token = page.nextPageToken || null;
    } while (token && acc.length < STEP_CAP);
    return { steps: acc, more: token };
  }

  async function runPage(id, token, quiet) {
    const began = performance.now();
    const inst = await api(`instances/${encodeURIComponent(id)}?includeSteps=false`);
    let loaded;
    try {
      loaded = await loadSteps(id, inst);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
      const full = await api(`instances/${encodeURIComponent(id)}`);
      loaded = { steps: full.steps || [], more: null };
    }
    let definition = null;
    if (inst.definitionName) {
      const path = inst.definitionVersion
        ? `definitions/${encodeURIComponent(inst.definitionName)}/versions/${inst.definitionVersion}`
        : `definitions/${encodeURIComponent(inst.definitionName)}`;
      definition = await api(path).catch(() => null);
    }
    if (!current(token)) return;
    const state = { inst, steps: loaded.steps, more: loaded.more, definition, selected: view.selected || null, expanded: view.expanded || null };
    // A refresh keeps the focus where the user left it (a graph node, a button).
    const focused = document.activeElement;
    const focusKey = focused && (focused.id ? `#${focused.id}` : focused.dataset && focused.dataset.step ? `svg.graph .node[data-step="${CSS.escape(focused.dataset.step)}"]` : null);
    const scrolls = [...document.querySelectorAll("main .scroll, main .graph-wrap")].map((el) => el.scrollTop);
    renderRun(state, token);
    if (quiet) {
      [...document.querySelectorAll("main .scroll, main .graph-wrap")].forEach((el, i) => { if (scrolls[i]) el.scrollTop = scrolls[i]; });
      const again = focusKey && document.querySelector(focusKey);
      if (again) again.focus({ preventScroll: true });
    }
    // Refresh while the run is active; a big run (slow to fetch and draw) less often.
    const took = (performance.now() - began) / 1000;
    if (ACTIVE.has(inst.status)) refreshIn(Math.max(2, Math.min(60, took * 10)), () => runPage(id, token, true).catch((e) => failed(e, token, "runs", id)));
  }

  function byStep(steps) {
    const m = new Map();
    for (const e of steps) {
      if (!m.has(e.stepId)) m.set(e.stepId, []);
      m.get(e.stepId).push(e);
    }
    return m;
  }
  function aggregate(execs) {
    if (!execs || !execs.length) return "NONE";
    const has = (st) => execs.some((e) => e.status === st);
    if (has("IN_PROGRESS")) return "IN_PROGRESS";
    if (has("SCHEDULED")) return "SCHEDULED";
    const latest = execs.reduce((a, b) => (String(b.createdAt) > String(a.createdAt) ? b : a));
    return latest.status;
  }

  function renderRun(state, token) {
    const { inst } = state;
    const groups = byStep(state.steps);
    const detail = h("section", { class: "card detail", id: "detail", "aria-labelledby": "detail-title" },
      h("h3", { id: "detail-title", text: "Step" }), h("p", { class: "muted", text: "Select a step in the graph or the timeline." }));
    const select = (stepId) => {
      view.selected = stepId;
      for (const n of document.querySelectorAll("svg.graph .node")) n.classList.toggle("selected", n.dataset.step === stepId);
      renderDetail(detail, state, stepId, groups.get(stepId) || [], token);
    };
    const head = h("div", { class: "run-head" },
      h("h2", {}, "Run ", h("span", { class: "mono", id: "run-id", text: inst.id })),
      h("span", { id: "run-status" }, statusBadge(inst.status), archivedBadge(inst)),
      h("span", {}, "Definition ", h("a", { href: `#/definitions/${encodeURIComponent(inst.definitionName)}${inst.definitionVersion ? `/${inst.definitionVersion}` : ""}`, text: `${inst.definitionName}${inst.definitionVersion ? ` v${inst.definitionVersion}` : ""}` })),
      inst.correlationId ? h("span", {}, "Correlation ", h("span", { class: "mono", text: inst.correlationId })) : null,
      scheduleLink(inst.correlationId),
      inst.parentInstanceId ? h("span", {}, "Parent ", h("a", { href: `#/runs/${encodeURIComponent(inst.parentInstanceId)}`, text: inst.parentInstanceId })) : null,
      h("span", { class: "muted", text: `created ${when(inst.createdAt)} · ${ms(inst.createdAt, inst.completedAt)}${inst.run > 1 ? ` · run ${inst.run}` : ""}` }));
    const reason = inst.reason ? h("p", {}, h("strong", { text: "Reason: " }), inst.reason) : null;
    const actions = runActions(inst);
    const graphCard = h("section", { class: "card", "aria-labelledby": "graph-title" },
      h("h3", { id: "graph-title", text: "Graph" }),
      state.definition ? graphSvg(state.definition.steps || [], groups, select, state) : h("p", { class: "muted", text: "The definition version of this run is not available; the timeline below still lists every step." }),
      legend());
    const more = state.more ? h("p", {}, `${state.steps.length} step executions loaded; more exist. `,
      h("button", { type: "button", id: "load-more-steps", text: "Load more", onclick: async () => {
        try {
          const next = await loadStepPages(inst.id, state.more, state.steps);
          state.steps = next.steps; state.more = next.more;
          renderRun(state, token);
        } catch (e) { showError(e); }
      } })) : null;
    const timelineCard = h("section", { class: "card", "aria-labelledby": "timeline-title" },
      h("h3", { id: "timeline-title", text: "Timeline" }), more, timeline(state, groups, select));
    const history = h("section", { class: "card", "aria-labelledby": "history-title" }, h("h3", { id: "history-title", text: "History" }));
    const io = h("details", { class: "card" }, h("summary", { text: "Run input, variables and output" }),
      h("div", { class: "detail" }, h("h4", { text: "Input" }), h("pre", { text: json(inst.input) }),
        h("h4", { text: "Variables" }), h("pre", { text: json(inst.variables) }),
        h("h4", { text: "Output" }), h("pre", { text: json(inst.output) })));
    main().replaceChildren(...[head, reason, actions, h("div", { class: "grid" }, graphCard, detail), timelineCard, io, history].filter(Boolean));
    fitGraphs();
    if (state.selected) select(state.selected);
    loadHistory(history, inst.id, null, token);
  }

  function legend() {
    return h("div", { class: "legend", "aria-label": "Status colours" },
      ["COMPLETED", "IN_PROGRESS", "SCHEDULED", "FAILED", "TIMED_OUT", "CANCELLED", "SKIPPED", "NONE"].map((st) => statusBadge(st === "NONE" ? null : st)));
  }

  // --- actions ----------------------------------------------------------------------------------
  function confirmDialog(title, text, extra) {
    const dlg = document.getElementById("confirm");
    document.getElementById("confirm-title").textContent = title;
    document.getElementById("confirm-text").textContent = text;
    document.getElementById("confirm-extra").replaceChildren(...(extra ? [extra] : []));
    return new Promise((resolve) => {
      dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
      dlg.returnValue = "";
      dlg.showModal();
      document.getElementById("confirm-no").focus();
    });
  }
  async function act(label, text, path, body, extra) {
    if (!(await confirmDialog(label, text, extra))) return;
    try {
      await api(path, { method: "POST", body: typeof body === "function" ? body() : body });
      route();
    } catch (e) {
      showError(e);
    }
  }
  function runActions(inst) {
    if (inst.archived) {
      return h("p", { class: "muted", id: "archived-note", text: `Archived ${when(inst.archivedAt)}: its retention passed, so it is read from the archive and cannot be changed.` });
    }
    const id = encodeURIComponent(inst.id);
    const st = inst.status;
    const terminal = !ACTIVE.has(st);
    const b = (name, label, enabled, danger, text) => h("button", {
      type: "button", id: `action-${name}`, class: danger ? "danger" : null, disabled: !enabled,
      onclick: () => act(`${label} run`, text, `instances/${id}/${name}`, {}),
    }, label);
    return h("div", { class: "actions", role: "group", "aria-label": "Run actions" },
      b("cancel", "Cancel", ACTIVE.has(st), true, "Cancel this run? Open work is cancelled; this cannot be undone."),
      b("pause", "Pause", st === "RUNNING", false, "Pause this run? No new work starts until it is resumed."),
      b("resume", "Resume", st === "PAUSED", false, "Resume this run?"),
      b("retry", "Retry", st === "FAILED" || st === "TIMED_OUT", false, "Run this failed run again from what failed?"),
      b("restart", "Restart", terminal, false, "Run this run again from the start with the same input?"));
  }

  // --- the graph --------------------------------------------------------------------------------
  const NW = 170, NH = 40, VG = 34, HG = 24, PAD = 12;
  const LOOP = 64; // right of a MAP's or DO_WHILE's box: the loop-back arrow and its label
  function childLists(step) {
    switch (step.type) {
      case "PARALLEL": return (step.branches || []).map((b, i) => ({ label: `branch ${i}`, steps: b }));
      case "SWITCH": {
        const out = [];
        if (Array.isArray(step.cases)) step.cases.forEach((c, i) => out.push({ label: c.condition || `case ${i}`, steps: c.steps || [] }));
        else for (const [k, v] of Object.entries(step.cases || {})) out.push({ label: k, steps: v });
        if (step.default) out.push({ label: "default", steps: step.default });
        return out;
      }
      case "MAP": return [{ label: "each item", steps: step.steps || [], box: true }];
      case "DO_WHILE": return [{ label: "loop", steps: step.steps || [], box: true }];
      default: return [];
    }
  }
  // A step's type as its node shows it, saying when a script decides (SCRIPT, a SWITCH by script,
  // a DO_WHILE whose while is JavaScript); the script itself is in the node's tooltip.
  function kindOf(step) {
    if (step.type === "SCRIPT") return "SCRIPT · JavaScript";
    if (step.type === "JQ") return "JQ · jq filter";
    if (step.type === "HTTP" || step.type === "HTTP_POLL") {
      const r = step.request;
      return typeof r === "object" && r ? `${step.type} · ${(r.method || "GET").toUpperCase()}` : step.type;
    }
    if (step.type === "START_WORKFLOW") {
      const r = step.request;
      const name = typeof r === "object" && r ? r.name || r.definitionName : null;
      return name ? `START_WORKFLOW · ${name}` : "START_WORKFLOW";
    }
    if (step.type === "EVENT") return `EVENT · ${step.sink}`;
    if (step.type === "SWITCH" && step.script) return "SWITCH · by script";
    if (step.type === "DO_WHILE" && step.whileLanguage === "javascript") return "DO_WHILE · JavaScript";
    return step.type;
  }
  function measureList(steps) {
    const items = steps.map(measureStep);
    const w = Math.max(NW, ...items.map((i) => i.w));
    const h2 = items.reduce((a, i) => a + i.h, 0) + VG * Math.max(0, items.length - 1);
    return { items, w, h: Math.max(h2, 0) };
  }
  function measureStep(step) {
    const lists = childLists(step).map((l) => ({ ...l, m: measureList(l.steps) }));
    if (!lists.length) return { step, lists, w: NW, h: NH };
    const inner = lists.reduce((a, l) => a + l.m.w, 0) + HG * (lists.length - 1);
    const boxed = lists.some((l) => l.box);
    // The loop label sits right of the box; the same room on the left keeps the step centred.
    const w = Math.max(NW, inner) + (boxed ? 2 * (PAD + LOOP) : 0);
    const hh = NH + VG + Math.max(...lists.map((l) => l.m.h)) + (boxed ? 2 * PAD : 0) + VG + 8;
    return { step, lists, w, h: hh };
  }
  function graphSvg(steps, groups, onSelect, state) {
    const m = measureList(steps);
    const W = m.w + 40, H = m.h + 40;
    const edges = s("g", {}), boxes = s("g", {}), nodes = s("g", {});
    const svg = s("svg", { class: "graph", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "group", "aria-label": "Workflow graph: each step is a button" },
      s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, s("path", { d: "M0,0 L10,5 L0,10 z", fill: "#57606a" }))),
      boxes, edges, nodes);
    const line = (x1, y1, x2, y2, label) => {
      const mid = (y1 + y2) / 2;
      edges.append(s("path", { class: "edge", d: `M${x1},${y1} V${mid} H${x2} V${y2}`, "marker-end": "url(#arrow)" }));
      if (label) edges.append(s("text", { class: "elabel", x: x2 + 4, y: y2 - 6, "data-full": label }, label.length > 28 ? `${label.slice(0, 27)}…` : label));
    };
    // Places a list centred on cx from y; returns [entry(top centre), exit(bottom centre)] or null.
    function placeList(list, cx, y) {
      let prev = null, first = null, cy = y;
      for (const it of list.items) {
        const [top, bottom] = placeStep(it, cx, cy);
        if (prev) line(prev[0], prev[1], top[0], top[1]);
        if (!first) first = top;
        prev = bottom;
        cy += it.h + VG;
      }
      return first ? [first, prev] : null;
    }
    function placeStep(it, cx, y) {
      const step = it.step;
      const execs = groups.get(step.id) || [];
      const status = groups.size || state.inst ? aggregate(execs) : "NONE";
      const x = cx - NW / 2;
      const child = execs.find((e) => e.childInstanceId);
      const label = `${step.id}`;
      const sub = `${kindOf(step)}${execs.length > 1 ? ` ×${execs.length}` : ""}`;
      const code = step.script || step.query || (step.whileLanguage === "javascript" ? step.while : "") ||
        (step.type === "HTTP" ? (typeof step.request === "string" ? step.request : (step.request || {}).uri || "") : "");
      const g = s(child ? "a" : "g", {
        class: "node", tabindex: 0, role: child ? "link" : "button", "data-step": step.id, "data-status": status, "data-type": step.type,
        "aria-label": `${step.id}, ${step.type}, ${status === "NONE" ? "not run" : status}${execs.length > 1 ? `, ${execs.length} executions` : ""}${child ? ", opens the child run" : ""}`,
        href: child ? `#/runs/${encodeURIComponent(child.childInstanceId)}` : null,
      },
      s("rect", { x, y, width: NW, height: NH, class: `fill-${status}` }),
      s("rect", { x, y, width: 6, height: NH, class: `stripe stripe-${status}` }),
      s("text", { class: "nlabel", x: x + 12, y: y + 16, "font-weight": 600 }, label),
      s("text", { class: "nlabel", x: x + 12, y: y + 31, fill: "#545d68" }, child ? `${sub} ↗` : sub),
      s("title", {}, `${step.id} (${step.type}): ${status === "NONE" ? "not run" : status}${code ? `\n${code}` : ""}`));
      if (!child) {
        g.addEventListener("click", () => onSelect(step.id));
        g.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); onSelect(step.id); } });
      }
      nodes.append(g);
      const top = [cx, y], nodeBottom = [cx, y + NH];
      if (!it.lists.length) return [top, nodeBottom];
      const boxed = it.lists.some((l) => l.box);
      const inner = it.lists.reduce((a, l) => a + l.m.w, 0) + HG * (it.lists.length - 1);
      let lx = cx - inner / 2;
      const ly = y + NH + VG + (boxed ? PAD : 0);
      const joinY = y + it.h - 8;
      const exits = [];
      for (const l of it.lists) {
        const lcx = lx + l.m.w / 2;
        const ends = placeList(l.m, lcx, ly);
        if (boxed) {
          boxes.append(s("rect", { class: "box", x: lx - PAD, y: ly - PAD, width: l.m.w + 2 * PAD, height: l.m.h + 2 * PAD, rx: 8 }));
        }
        if (ends) {
          line(nodeBottom[0], nodeBottom[1], ends[0][0], boxed ? ly - PAD : ends[0][1], l.label);
          exits.push(ends[1]);
        }
        lx += l.m.w + HG;
      }
      if (boxed) {
        const bx = cx + inner / 2 + PAD;
        edges.append(s("path", { class: "edge", d: `M${cx},${ly + it.lists[0].m.h + PAD} V${joinY - 4} M${bx},${ly + it.lists[0].m.h} H${bx + 10} V${ly} H${bx}`, "marker-end": "url(#arrow)" }));
        edges.append(s("text", { class: "elabel", x: bx + 12, y: ly + 12 }, step.type === "MAP" ? "per item" : "repeat"));
      } else {
        for (const e of exits) edges.append(s("path", { class: "edge", d: `M${e[0]},${e[1]} V${joinY - 6} H${cx} V${joinY}` }));
      }
      nodes.append(s("circle", { cx, cy: joinY, r: 4, fill: "#57606a" }));
      return [top, [cx, joinY + 4]];
    }
    placeList(m, 20 + m.w / 2, 20);
    const wrap = h("div", { class: "graph-wrap" });
    svg.dataset.fit = "pending"; // fitGraphs() measures it once it is in the page
    wrap.append(svg);
    return wrap;
  }

  // Text can only be measured once drawn: shorten a node's labels that would leave the node
  // (the whole id stays in its title and aria-label), then size each graph to everything drawn,
  // so no label is cut at the edge (a MAP's "per item", a long case condition).
  function fitGraphs() {
    for (const svg of document.querySelectorAll('svg.graph[data-fit="pending"]')) {
      for (const t of svg.querySelectorAll("text.nlabel")) {
        const room = NW - 18;
        let text = t.textContent;
        while (text.length > 2 && t.getComputedTextLength() > room) {
          text = text.slice(0, -1);
          t.textContent = `${text}…`;
        }
      }
      const b = svg.getBBox();
      const x0 = Math.min(0, Math.floor(b.x) - 8), y0 = Math.min(0, Math.floor(b.y) - 8);
      const x1 = Math.max(+svg.getAttribute("width"), Math.ceil(b.x + b.width) + 8);
      const y1 = Math.max(+svg.getAttribute("height"), Math.ceil(b.y + b.height) + 8);
      svg.setAttribute("viewBox", `${x0} ${y0} ${x1 - x0} ${y1 - y0}`);
      svg.setAttribute("width", x1 - x0);
      svg.setAttribute("height", y1 - y0);
      svg.dataset.fit = "done";
    }
  }

  // --- the timeline -----------------------------------------------------------------------------
  function timeline(state, groups, onSelect) {
    const steps = state.steps;
    if (!steps.length) return h("p", { class: "muted", text: "No step has run yet." });
    const t0 = Math.min(...steps.map((e) => +new Date(e.createdAt)));
    const now = Date.now();
    const end = (e) => +new Date(e.completedAt || (e.status === "IN_PROGRESS" || e.status === "SCHEDULED" ? now : e.startedAt || e.createdAt));
    const t1 = Math.max(t0 + 1, ...steps.map(end));
    const pct = (t) => `${(((t - t0) / (t1 - t0)) * 100).toFixed(3)}%`;
    const wid = (a, b) => `${Math.max(0, ((b - a) / (t1 - t0)) * 100).toFixed(3)}%`;
    const rows = [];
    const rowOf = (e, label) => {
      const created = +new Date(e.createdAt), started = e.startedAt ? +new Date(e.startedAt) : null;
      const waitEnd = end(e);
      const track = h("td", { class: "track" });
      // Its whole life as a thin grey line: what no bar covers is waiting (queued, a retry
      // delay, a timer, a person).
      if (waitEnd > created) track.append(h("span", { class: "wait", style: null, "data-left": pct(created), "data-width": wid(created, waitEnd) }));
      if (started) {
        track.append(h("span", { class: `bar st-${e.status}`, title: `${e.stepId} ${e.status}`, "data-left": pct(started), "data-width": wid(started, end(e)) }));
      }
      const where = [e.branch != null ? `branch ${e.branch}` : null, e.itemIndex != null ? `item ${e.itemIndex}` : null, e.iteration != null ? `iteration ${e.iteration}` : null].filter(Boolean).join(", ");
      return h("tr", { "data-step": e.stepId, "data-status": e.status, "data-execution": e.id },
        h("th", { scope: "row" }, h("button", { type: "button", class: "link", onclick: () => onSelect(e.stepId), text: label || e.stepId }), where ? h("div", { class: "muted", text: where }) : null),
        h("td", { class: "attempts", text: String(e.attempts ?? e.attempt ?? 1) }),
        h("td", {}, statusBadge(e.status)),
        h("td", { text: e.startedAt ? ms(e.startedAt, e.completedAt) : e.wakeAt ? `waits until ${when(e.wakeAt)}` : "" }),
        track);
    };
    for (const [stepId, execs] of groups) {
      if (execs.length <= ROWS_PER_STEP || state.expanded === stepId) {
        for (const e of execs.slice(0, 500)) rows.push(rowOf(e));
        if (execs.length > 500) rows.push(h("tr", {}, h("td", { colspan: 5, class: "muted", text: `… ${execs.length - 500} more executions of ${stepId} (see the step's detail)` })));
      } else {
        const counts = {};
        for (const e of execs) counts[e.status] = (counts[e.status] || 0) + 1;
        const first = Math.min(...execs.map((e) => +new Date(e.createdAt)));
        const last = Math.max(...execs.map(end));
        rows.push(h("tr", { "data-step": stepId, "data-status": aggregate(execs), "data-collapsed": execs.length },
          h("th", { scope: "row" }, h("button", { type: "button", class: "link", onclick: () => onSelect(stepId), text: stepId }),
            h("div", { class: "muted" }, `${execs.length} executions (collapsed) `,
              h("button", { type: "button", text: "Expand", "aria-label": `Expand the ${execs.length} executions of ${stepId}`, onclick: () => { state.expanded = view.expanded = stepId; renderRun(state, view.token); } }))),
          h("td", { text: "" }),
          h("td", {}, Object.entries(counts).map(([st, n]) => h("span", {}, statusBadge(st), ` ${n} `))),
          h("td", { text: ms(new Date(first).toISOString(), new Date(last).toISOString()) }),
          h("td", { class: "track" }, h("span", { class: `bar st-${aggregate(execs)}`, "data-left": pct(first), "data-width": wid(first, last) }))));
      }
    }
    const table = h("table", { class: "timeline", id: "timeline", "data-t0": t0, "data-t1": t1 },
      h("caption", { class: "muted", text: `From ${when(new Date(t0).toISOString())} to ${when(new Date(t1).toISOString())}; grey: waiting (queued, retry delay, timer)` }),
      h("thead", {}, h("tr", {}, ["Step", "Attempts", "Status", "Duration", "Time"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, rows));
    // Positions through the CSSOM (the CSP forbids inline style attributes).
    for (const el of table.querySelectorAll("[data-left]")) {
      el.style.left = el.dataset.left;
      el.style.width = el.dataset.width;
    }
    return h("div", { class: "scroll" }, table);
  }

  // --- a step's detail --------------------------------------------------------------------------
  function renderDetail(panel, state, stepId, execs, token) {
    const inst = state.inst;
    const id = encodeURIComponent(inst.id);
    const shown = execs.slice(-50).reverse();
    const blocks = shown.map((e) => {
      const waiting = e.status === "IN_PROGRESS" || e.status === "SCHEDULED";
      const buttons = [];
      if (waiting && e.type === "USER_TASK") {
        const ta = h("textarea", { id: `vars-${e.id}`, "aria-label": "Variables to set (JSON object)" }, "{}");
        buttons.push(h("button", { type: "button", class: "primary", "data-action": "complete", onclick: () => act("Complete user task", `Complete ${stepId}?`, `instances/${id}/user-tasks/${encodeURIComponent(stepId)}/complete`, () => ({ stepExecutionId: e.id, variablesToSet: JSON.parse(ta.value || "{}") }), h("label", {}, "Variables to set (JSON)", ta)) }, "Complete task…"));
      }
      if (waiting && e.type === "SIGNAL") {
        const ta = h("textarea", { id: `payload-${e.id}`, "aria-label": "Signal payload (JSON)" }, "{}");
        buttons.push(h("button", { type: "button", class: "primary", "data-action": "signal", onclick: () => act("Send signal", `Send a signal to ${stepId}?`, `instances/${id}/signals/${encodeURIComponent(stepId)}`, () => ({ stepExecutionId: e.id, payload: JSON.parse(ta.value || "null") }), h("label", {}, "Payload (JSON)", ta)) }, "Send signal…"));
      }
      // Offloaded input/output: {"$payload": path, "sizeBytes": n, "downloadUrl": presigned GET}.
      const offloaded = ["input", "output"].filter((k) => e[k] && typeof e[k] === "object" && typeof e[k].downloadUrl === "string" && /^https?:\/\//.test(e[k].downloadUrl))
        .map((k) => h("li", {}, h("a", { href: e[k].downloadUrl, rel: "noreferrer", download: "", "data-payload": k, text: `download ${k} (${e[k].sizeBytes} bytes, offloaded)` })));
      const links = Object.entries(e).filter(([k, v]) => /payload(url|path)$/i.test(k) && typeof v === "string" && /^https:\/\//.test(v))
        .map(([k, v]) => h("li", {}, h("a", { href: v, rel: "noreferrer", download: "", text: `download ${k}` })))
        .concat(offloaded);
      return h("article", { class: "exec", "data-execution": e.id },
        h("dl", {},
          h("dt", { text: "status" }), h("dd", {}, statusBadge(e.status)),
          h("dt", { text: "attempt" }), h("dd", { text: String(e.attempt ?? "") }),
          e.branch != null ? [h("dt", { text: "branch" }), h("dd", { text: String(e.branch) })] : null,
          e.itemIndex != null ? [h("dt", { text: "item" }), h("dd", { text: String(e.itemIndex) })] : null,
          e.iteration != null ? [h("dt", { text: "iteration" }), h("dd", { text: String(e.iteration) })] : null,
          h("dt", { text: "worker" }), h("dd", { class: "mono", text: e.workerId || "–" }),
          e.jobType ? [h("dt", { text: "job type" }), h("dd", { text: e.jobType })] : null,
          h("dt", { text: "created" }), h("dd", { text: when(e.createdAt) }),
          h("dt", { text: "started" }), h("dd", { text: when(e.startedAt) || "–" }),
          h("dt", { text: "completed" }), h("dd", { text: when(e.completedAt) || "–" }),
          e.wakeAt ? [h("dt", { text: "wakes at" }), h("dd", { text: when(e.wakeAt) })] : null,
          e.childInstanceId ? [h("dt", { text: "child run" }), h("dd", {}, h("a", { href: `#/runs/${encodeURIComponent(e.childInstanceId)}`, text: e.childInstanceId }))] : null),
        e.error ? [h("h4", { text: "Error" }), h("pre", { class: "err", text: e.error })] : null,
        h("h4", { text: "Input" }), h("pre", { text: json(e.input) }),
        h("h4", { text: "Output" }), h("pre", { text: json(e.output) }),
        e.attempts != null ? [h("dt", { text: "attempts" }), h("dd", { text: String(e.attempts) })] : null,
        links.length ? h("ul", {}, links) : null,
        buttons.length ? h("div", { class: "actions" }, buttons) : null);
    });
    panel.replaceChildren(h("h3", { id: "detail-title", tabindex: -1 }, "Step ", h("span", { class: "mono", text: stepId })),
      execs.length ? h("p", { class: "muted", text: `${execs.length} execution(s)${execs.length > 50 ? "; the latest 50 shown" : ""}` }) : h("p", { class: "muted", text: "This step has not run." }),
      h("div", { class: "scroll" }, blocks));
  }

  // --- history ----------------------------------------------------------------------------------
  async function loadHistory(section, id, pageToken, token, events) {
    const seen = events || [];
    let page;
    try {
      page = await api(`instances/${encodeURIComponent(id)}/history${qs({ limit: 500, pageToken })}`);
    } catch (e) {
      if (!current(token)) return;
      section.append(h("p", { class: "muted", text: e instanceof ApiError ? `History not available: ${e.title}: ${e.detail}` : String(e) }));
      return;
    }
    if (!current(token)) return;
    let table = section.querySelector("table");
    if (!table) {
      table = h("table", { id: "history" }, h("thead", {}, h("tr", {}, ["#", "At", "Event", "Step", "Attempt", "Worker", "Message"].map((t) => h("th", { scope: "col", text: t })))), h("tbody"));
      section.append(h("div", { class: "scroll" }, table));
    }
    const body = table.querySelector("tbody");
    for (const ev of page.events || []) {
      body.append(h("tr", { "data-type": ev.type },
        h("td", { text: String(ev.seq ?? "") }), h("td", { text: when(ev.at) }), h("td", { class: "mono", text: ev.type }),
        h("td", { text: ev.stepId || "" }), h("td", { text: ev.attempt != null ? String(ev.attempt) : "" }),
        h("td", { class: "mono", text: ev.workerId || "" }),
        h("td", { text: [ev.message, ev.detail ? JSON.stringify(ev.detail) : null].filter(Boolean).join(" ") })));
    }
    const old = section.querySelector(".more-history");
    if (old) old.remove();
    seen.push(...(page.events || []));
    drawAttempts(seen);
    if (page.nextPageToken) {
      section.append(h("p", { class: "more-history" }, h("button", { type: "button", text: "More history", onclick: () => loadHistory(section, id, page.nextPageToken, token, seen) })));
    }
  }

  // Each worker attempt of a step execution as its own bar, from the history: dispatched ->
  // completed / failed / timed out / lease expired; the gaps between are the retry delays.
  const ATTEMPT_END = { JOB_COMPLETED: "COMPLETED", JOB_FAILED: "FAILED", JOB_TIMED_OUT: "TIMED_OUT", JOB_LEASE_EXPIRED: "TIMED_OUT", JOB_CANCELLED: "CANCELLED" };
  function drawAttempts(events) {
    const table = document.getElementById("timeline");
    if (!table) return;
    const t0 = +table.dataset.t0, t1 = +table.dataset.t1;
    const pct = (t) => `${Math.max(0, Math.min(100, ((t - t0) / (t1 - t0)) * 100)).toFixed(3)}%`;
    const wid = (a, b) => `${Math.max(0, ((Math.min(b, t1) - Math.max(a, t0)) / (t1 - t0)) * 100).toFixed(3)}%`;
    const byExec = new Map();
    for (const ev of events) {
      if (!ev.stepExecutionId || ev.attempt == null || !String(ev.type).startsWith("JOB_")) continue;
      if (!byExec.has(ev.stepExecutionId)) byExec.set(ev.stepExecutionId, new Map());
      const attempts = byExec.get(ev.stepExecutionId);
      if (!attempts.has(ev.attempt)) attempts.set(ev.attempt, { attempt: ev.attempt });
      const a = attempts.get(ev.attempt);
      const at = +new Date(ev.at);
      if (ev.type === "JOB_DISPATCHED") { a.start = at; a.worker = ev.workerId; }
      else if (ATTEMPT_END[ev.type]) { a.end = at; a.status = ATTEMPT_END[ev.type]; a.message = ev.message; }
    }
    for (const [execId, attempts] of byExec) {
      const row = table.querySelector(`tr[data-execution="${CSS.escape(execId)}"]`);
      if (!row) continue;
      const list = [...attempts.values()].filter((a) => a.start).sort((x, y) => x.attempt - y.attempt);
      if (!list.length) continue;
      const track = row.querySelector("td.track");
      track.querySelectorAll(".bar").forEach((b) => b.remove());
      for (const a of list) {
        const status = a.status || (row.dataset.status === "IN_PROGRESS" ? "IN_PROGRESS" : row.dataset.status);
        const bar = h("span", { class: `bar attempt st-${status}`, "data-attempt": a.attempt, title: `attempt ${a.attempt}: ${status}${a.worker ? ` on ${a.worker}` : ""}${a.message ? `: ${a.message}` : ""}` });
        bar.style.left = pct(a.start);
        bar.style.width = wid(a.start, a.end || Date.now());
        track.append(bar);
      }
      row.querySelector("td.attempts").textContent = String(list.length);
    }
  }

  // --- definitions ------------------------------------------------------------------------------
  async function definitionsPage(token) {
    const all = [];
    let pageToken = null;
    do {
      const page = await api(`definitions${qs({ limit: 100, pageToken })}`);
      all.push(...(page.definitions || []));
      pageToken = page.nextPageToken;
    } while (pageToken && all.length < 1000);
    if (!current(token)) return;
    main().replaceChildren(h("h2", { text: "Definitions" }),
      h("table", { id: "definitions" },
        h("thead", {}, h("tr", {}, ["Name", "Latest version", "Steps", "Created"].map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, all.map((d) => h("tr", {},
          h("td", {}, h("a", { href: `#/definitions/${encodeURIComponent(d.name)}`, text: d.name })),
          h("td", { text: String(d.version) }), h("td", { text: String((d.steps || []).length) }), h("td", { text: when(d.createdAt) }))))));
  }
  async function definitionPage(name, version, token) {
    const latest = await api(`definitions/${encodeURIComponent(name)}`);
    const d = version && String(version) !== String(latest.version)
      ? await api(`definitions/${encodeURIComponent(name)}/versions/${encodeURIComponent(version)}`)
      : latest;
    if (!current(token)) return;
    const versions = [];
    for (let v = latest.version; v >= 1; v--) versions.push(v);
    const sel = h("select", { id: "version", onchange: (ev) => { window.location.hash = `#/definitions/${encodeURIComponent(name)}/${ev.target.value}`; } },
      versions.map((v) => h("option", { value: v, selected: v === d.version, text: `version ${v}${v === latest.version ? " (latest)" : ""}` })));
    main().replaceChildren(h("h2", {}, "Definition ", h("span", { class: "mono", text: d.name })),
      h("p", {}, h("label", { for: "version", text: "Version " }), sel, " ",
        h("a", { href: `#/runs${qs({ definitionName: d.name })}`, text: "Runs of this definition" })),
      h("p", { class: "muted", text: d.description || "" }),
      h("section", { class: "card" }, h("h3", { text: "Graph" }), graphSvg(d.steps || [], new Map(), () => {}, { inst: null })),
      h("details", { class: "card" }, h("summary", { text: "JSON" }), h("pre", { class: "mono", text: json(d) })));
    fitGraphs();
  }

  // --- queues -----------------------------------------------------------------------------------
  async function queuesPage(token) {
    const page = await api("queues?limit=100");
    if (!current(token)) return;
    const cols = ["pending", "processing", "completed", "failed", "dead"];
    main().replaceChildren(h("h2", { text: "Queues" }),
      h("table", { id: "queues" },
        h("thead", {}, h("tr", {}, ["Queue", ...cols].map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, (page.queues || []).length ? page.queues.map((q) => h("tr", {},
          h("td", {}, h("a", { href: `#/queues/${encodeURIComponent(q.name)}`, text: q.name })),
          cols.map((c) => h("td", { text: String(q[c] ?? 0) })))) : h("tr", {}, h("td", { colspan: 6, class: "muted", text: "No queues." })))));
  }
  async function queuePage(name, token) {
    const q = encodeURIComponent(name);
    const [stats, peek] = await Promise.all([api(`queues/${q}/stats`), api(`queues/${q}/peek?limit=50`)]);
    if (!current(token)) return;
    const tasks = peek.tasks || peek || [];
    main().replaceChildren(h("h2", {}, "Queue ", h("span", { class: "mono", text: name })),
      h("dl", { class: "detail" }, Object.entries(stats).map(([k, v]) => [h("dt", { text: k }), h("dd", { text: String(v) })])),
      h("h3", { text: "Pending (peek, not claimed)" }),
      h("table", { id: "peek" },
        h("thead", {}, h("tr", {}, ["Task", "Title", "Priority", "Created", "Body"].map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, (Array.isArray(tasks) ? tasks : []).map((t) => h("tr", {},
          h("td", { class: "mono", text: t.id }), h("td", { text: t.title }), h("td", { text: String(t.priority ?? "") }),
          h("td", { text: when(t.createdAt) }), h("td", {}, h("pre", { class: "mono", text: String(t.body ?? "").slice(0, 500) })))))));
  }

  // --- schedules --------------------------------------------------------------------------------
  const SCHEDULE_PAGE = 50;
  const SCHEDULE_REFRESH = 5; // seconds between quiet refreshes of a schedule's page
  const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
  const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
  const NAMED = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6, jan: 1, feb: 2, mar: 3, apr: 4, may: 5, jun: 6, jul: 7, aug: 8, sep: 9, oct: 10, nov: 11, dec: 12 };
  const MACROS = {
    "@hourly": "every hour, on the hour", "@daily": "every day at 00:00", "@midnight": "every day at 00:00",
    "@weekly": "every Sunday at 00:00", "@monthly": "on day 1 of every month at 00:00",
    "@yearly": "every 1 January at 00:00", "@annually": "every 1 January at 00:00",
  };
  function seconds(n) {
    const v = Number(n) || 0;
    if (v && v % 86400 === 0) return `${v / 86400} day${v === 86400 ? "" : "s"}`;
    if (v && v % 3600 === 0) return `${v / 3600} h`;
    if (v && v % 60 === 0) return `${v / 60} min`;
    return `${v} s`;
  }
  // A cron field's values in words (numbers, names, lists, ranges), or null when it is more.
  function cronList(field, names, base) {
    const word = (x) => {
      const n = /^\d+$/.test(x) ? Number(x) : NAMED[x.toLowerCase()];
      return n === undefined || names[(n - base) % names.length] === undefined ? null : names[(n - base) % names.length];
    };
    const out = [];
    for (const part of field.split(",")) {
      const range = part.split("-");
      const words = range.map(word);
      if (words.some((w) => w === null) || range.length > 2) return null;
      out.push(words.join(" to "));
    }
    return out.join(", ");
  }
  const two = (x) => String(x).padStart(2, "0");
  // A cron expression in words, for the common shapes; null for the others (the expression is
  // always shown beside it, and croniter is the authority on what it means).
  function cronWords(expr) {
    const text = String(expr).trim();
    if (MACROS[text.toLowerCase()]) return MACROS[text.toLowerCase()];
    const f = text.split(/\s+/);
    if (f.length !== 5 && f.length !== 6) return null;
    const [sec, min, hour, dom, mon, dow] = f.length === 6 ? f : ["0", ...f];
    const num = (x) => /^\d+$/.test(x);
    let time;
    if (num(sec) && num(min) && num(hour)) time = `at ${two(hour)}:${two(min)}${Number(sec) ? `:${two(sec)}` : ""}`;
    else if (num(sec) && num(min) && hour === "*") time = `at minute ${Number(min)}${Number(sec) ? `, second ${Number(sec)}` : ""} of every hour`;
    else if (sec === "0" && /^\*\/\d+$/.test(min) && hour === "*") time = `every ${min.slice(2)} minutes`;
    else if (sec === "0" && min === "*" && hour === "*") time = "every minute";
    else if (/^\*\/\d+$/.test(sec) && min === "*" && hour === "*") time = `every ${sec.slice(2)} seconds`;
    else if (sec === "*" && min === "*" && hour === "*") time = "every second";
    else return null;
    // A day of the month and a day of the week both set: either one fires (as cron reads it).
    const days = [];
    if (dom !== "*" && dom !== "?") {
      if (!/^[\d,-]+$/.test(dom)) return null;
      days.push(`on day ${dom.replace(/,/g, ", ").replace(/-/g, " to ")} of the month`);
    }
    if (dow !== "*" && dow !== "?") {
      const w = cronList(dow, DAYS.concat(["Sunday"]), 0);
      if (!w) return null;
      days.push(`on ${w}`);
    }
    let out = `${time}${days.length ? ` ${days.join(" or ")}` : /^at \d/.test(time) && mon === "*" ? " every day" : ""}`;
    if (mon !== "*") {
      const w = cronList(mon, MONTHS, 1);
      if (!w) return null;
      out += ` in ${w}`;
    }
    return out;
  }
  // Every part of a spec as a line of words: its crons, its interval, its time zone, jitter, window.
  function specLines(spec) {
    const sp = spec || {};
    const lines = [];
    for (const c of sp.cron || []) {
      const words = cronWords(c);
      lines.push({ kind: "cron", code: c, text: words ? `${words}` : "(see the expression)" });
    }
    if (sp.interval) {
      const off = sp.interval.offsetSeconds ? `, offset ${seconds(sp.interval.offsetSeconds)}` : "";
      lines.push({ kind: "interval", code: null, text: `every ${seconds(sp.interval.everySeconds)}${off} (from the Unix epoch)` });
    }
    return lines;
  }
  function specText(spec) {
    const sp = spec || {};
    const parts = specLines(sp).map((l) => (l.code ? `${l.code}: ${l.text}` : l.text));
    parts.push(`time zone ${sp.timeZone || "UTC"}`);
    if (sp.jitterSeconds) parts.push(`jitter up to ${seconds(sp.jitterSeconds)}`);
    if (sp.startAt) parts.push(`from ${when(sp.startAt)}`);
    if (sp.endAt) parts.push(`until ${when(sp.endAt)}`);
    return parts.join("; ");
  }
  function pausedBadge(sc) {
    const st = sc.paused ? "PAUSED" : "ACTIVE";
    return h("span", { class: `status st-${st}`, "data-status": st }, sc.paused ? "paused" : "active");
  }
  // A time to come, how far it is from now ("in 3 days 22 h"), and its wall time in the
  // schedule's time zone when that is not UTC ("Mon 09:00 Europe/Berlin").
  function soon(t, zone) {
    const d = Math.round((new Date(t) - new Date()) / 1000);
    let rel = "";
    if (Number.isNaN(d)) rel = "";
    else if (d <= 0) rel = "due";
    else if (d < 60) rel = `in ${d} s`;
    else if (d < 3600) rel = `in ${Math.floor(d / 60)} min`;
    else if (d < 86400) rel = `in ${Math.floor(d / 3600)} h ${Math.floor((d % 3600) / 60)} min`;
    else rel = `in ${Math.floor(d / 86400)} day${d < 172800 ? "" : "s"} ${Math.floor((d % 86400) / 3600)} h`;
    let wall = "";
    if (zone && zone !== "UTC") {
      try {
        wall = `${new Intl.DateTimeFormat("en-GB", { timeZone: zone, weekday: "short", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" }).format(new Date(t))} ${zone}`;
      } catch (e) { wall = ""; }
    }
    return `${when(t)}${rel || wall ? ` (${[wall, rel].filter(Boolean).join(", ")})` : ""}`;
  }
  // The run of a schedule's slot: its correlationId is schedule:<id>:<slot time, ISO 8601 UTC>.
  const SLOT = /^schedule:(.+):(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z)$/;
  function scheduleLink(correlationId) {
    const m = SLOT.exec(correlationId || "");
    if (!m) return null;
    return h("span", {}, "Schedule ", h("a", { id: "run-schedule", href: `#/schedules/${encodeURIComponent(m[1])}`, text: m[1] }),
      h("span", { class: "muted", text: ` (slot ${when(m[2])})` }));
  }

  async function schedulesPage(params, token) {
    const pageToken = params.get("pageToken") || "";
    const page = await api(`schedules${qs({ limit: SCHEDULE_PAGE, pageToken })}`);
    if (!current(token)) return;
    const list = page.schedules || [];
    const rows = list.map((sc) => h("tr", { "data-schedule": sc.id, "data-paused": String(!!sc.paused) },
      h("td", {}, h("a", { href: `#/schedules/${encodeURIComponent(sc.id)}`, class: "mono", text: sc.id })),
      h("td", {}, h("a", { href: `#/definitions/${encodeURIComponent(sc.definitionName)}`, text: sc.definitionName }), sc.definitionVersion ? ` v${sc.definitionVersion}` : ""),
      h("td", { class: "spec", text: specText(sc.spec) }),
      h("td", { class: "mono", text: sc.overlapPolicy || "" }),
      h("td", {}, pausedBadge(sc)),
      h("td", { class: "next", text: sc.paused ? "–" : (sc.nextFireTimes || []).length ? soon(sc.nextFireTimes[0]) : "none (the spec has no slot left)" })));
    const table = h("table", { id: "schedules" },
      h("caption", { class: "muted", text: `${list.length} schedule(s) on this page` }),
      h("thead", {}, h("tr", {}, ["Schedule", "Definition", "Spec", "Overlap policy", "State", "Next fire time"].map((t) => h("th", { scope: "col", text: t })))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No schedules. ",
        h("code", { text: "baton schedules create" }), " or ", h("code", { text: "POST /v1/schedules" }), " adds one."))));
    const pager = h("div", { class: "pager" },
      h("button", { type: "button", id: "first-page", disabled: !pageToken, text: "First page", onclick: () => { window.location.hash = "#/schedules"; } }),
      h("button", { type: "button", id: "next-page", disabled: !page.nextPageToken, text: "Next page", onclick: () => { window.location.hash = `#/schedules${qs({ pageToken: page.nextPageToken })}`; } }));
    main().replaceChildren(h("h2", { text: "Schedules" }), table, pager);
  }

  async function schedulePage(id, token, quiet) {
    const sc = await api(`schedules/${encodeURIComponent(id)}`);
    if (!current(token)) return;
    const focused = document.activeElement;
    const focusId = quiet && focused && focused.id ? focused.id : null;
    renderSchedule(sc);
    const again = focusId && document.getElementById(focusId);
    if (again) again.focus({ preventScroll: true });
    refreshIn(SCHEDULE_REFRESH, () => schedulePage(id, token, true).catch((e) => failed(e, token, "schedules", id)));
  }

  function renderSchedule(sc) {
    const sp = sc.spec || {};
    const def = `${sc.definitionName}${sc.definitionVersion ? ` v${sc.definitionVersion}` : ""}`;
    const head = h("div", { class: "run-head" },
      h("h2", {}, "Schedule ", h("span", { class: "mono", id: "schedule-id", text: sc.id })),
      h("span", { id: "schedule-state" }, pausedBadge(sc)),
      h("span", {}, "Definition ", h("a", { href: `#/definitions/${encodeURIComponent(sc.definitionName)}${sc.definitionVersion ? `/${sc.definitionVersion}` : ""}`, text: def })),
      h("span", { class: "muted", text: `created ${when(sc.createdAt)} · updated ${when(sc.updatedAt)}` }));
    const note = sc.note ? h("p", { id: "schedule-note" }, h("strong", { text: "Note: " }), sc.note) : null;
    const dd = (label, ...value) => [h("dt", { text: label }), h("dd", {}, ...value)];
    const spec = h("dl", { id: "schedule-spec" },
      specLines(sp).map((l) => dd(l.kind, l.code ? [h("code", { text: l.code }), " "] : null, h("span", { class: "words", text: l.text }))),
      dd("time zone", sp.timeZone || "UTC"),
      sp.jitterSeconds ? dd("jitter", `up to ${seconds(sp.jitterSeconds)} after each slot`) : null,
      sp.startAt ? dd("starts", when(sp.startAt)) : null,
      sp.endAt ? dd("ends", when(sp.endAt)) : null,
      dd("overlap policy", h("span", { class: "mono", id: "schedule-overlap", text: sc.overlapPolicy || "SKIP" })),
      dd("catch-up window", seconds(sc.catchupWindowSeconds ?? 60)),
      dd("pause on failure", sc.pauseOnFailure ? "yes" : "no"));
    const next = sc.nextFireTimes || [];
    const nextCard = h("section", { class: "card", "aria-labelledby": "next-title" },
      h("h3", { id: "next-title", text: "Next fire times" }),
      sc.paused ? h("p", { class: "muted", text: "Paused: none of these fires until the schedule is unpaused." }) : null,
      next.length ? h("ol", { id: "next-fire-times" }, next.map((t) => h("li", { "data-time": t, text: soon(t, sp.timeZone) })))
        : h("p", { class: "muted", id: "next-fire-times", text: "None: the spec has no slot left." }));
    const actions = sc.recentActions || [];
    const recent = h("section", { class: "card", "aria-labelledby": "recent-title" },
      h("h3", { id: "recent-title", text: "Recent actions" }),
      h("div", { class: "scroll" }, h("table", { id: "recent-actions" },
        h("caption", { class: "muted", text: "The last ten settled slots, latest first" }),
        h("thead", {}, h("tr", {}, ["Slot time", "Kind", "Outcome", "Run", "Detail", "Settled"].map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, actions.length ? actions.map((a) => h("tr", { "data-slot": a.slotTime, "data-outcome": a.outcome },
          h("td", { text: when(a.slotTime) }),
          h("td", { class: "mono", text: a.kind || "" }),
          h("td", {}, h("span", { class: `status st-${a.outcome}`, "data-status": a.outcome }, a.outcome)),
          h("td", {}, a.instanceId ? h("a", { class: "mono", href: `#/runs/${encodeURIComponent(a.instanceId)}`, text: a.instanceId }) : "–"),
          h("td", { text: a.detail || "" }),
          h("td", { text: when(a.at) })))
          : h("tr", {}, h("td", { colspan: 6, class: "muted", text: "No slot has been settled yet." }))))));
    const input = h("details", { class: "card" }, h("summary", { text: "Input" }), h("div", { class: "detail" }, h("pre", { text: json(sc.input) })));
    main().replaceChildren(...[head, note, scheduleActions(sc), h("section", { class: "card detail", "aria-label": "Spec" }, spec), nextCard, recent, input].filter(Boolean));
  }

  function scheduleActions(sc) {
    const path = (verb) => `schedules/${encodeURIComponent(sc.id)}/${verb}`;
    const noteInput = h("input", { id: "pause-note", maxlength: 500, autocomplete: "off" });
    const b = (name, label, enabled, onclick) => h("button", { type: "button", id: `action-${name}`, disabled: !enabled, onclick }, label);
    return h("div", { class: "actions", role: "group", "aria-label": "Schedule actions" },
      b("pause", "Pause", !sc.paused, () => act("Pause schedule", `Pause ${sc.id}? No slot fires while it is paused, and the slots of the paused time are not fired later.`,
        path("pause"), () => (noteInput.value.trim() ? { note: noteInput.value.trim() } : {}), h("label", {}, "Note (optional)", noteInput))),
      b("unpause", "Unpause", !!sc.paused, () => act("Unpause schedule", `Unpause ${sc.id}? It fires from its next slot on.`, path("unpause"), {})),
      b("trigger", "Trigger now", true, () => act("Trigger schedule", `Start a run of ${sc.id} now? The slot follows the overlap policy (${sc.overlapPolicy || "SKIP"}), even while the schedule is paused.`, path("trigger"), {})));
  }

  // --- start ------------------------------------------------------------------------------------
  document.addEventListener("DOMContentLoaded", () => {
    document.getElementById("forget-key").addEventListener("click", () => {
      window.sessionStorage.removeItem(KEY);
      route();
    });
    window.addEventListener("hashchange", () => { view.selected = null; view.expanded = null; route(); });
    route();
  });
})();
