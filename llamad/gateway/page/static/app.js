// llamad's page: models, memory, live activity, playground. No build step, no network
// beyond this gateway. The key (when the gateway has one) stays in this tab's session.
"use strict";
const $ = (sel) => document.querySelector(sel);
const COLOURS = ["#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2", "#65a30d"];
const colourOf = {};
let key = sessionStorage.getItem("llamad-key") || "";
let records = [];
let refreshing = null;

function colour(model) {
  if (!(model in colourOf)) colourOf[model] = COLOURS[Object.keys(colourOf).length % COLOURS.length];
  return colourOf[model];
}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

class NeedKey extends Error {}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = headers(opts.headers);
  const r = await fetch(path, opts);
  if (r.status === 401) throw new NeedKey();
  return r;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function size(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "K", "M", "G", "T"];
  let v = n, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (v < 10 && i >= 3 ? v.toFixed(1) : Math.round(v)) + units[i];
}

function secs(s) {
  if (s === null || s === undefined) return "-";
  if (s < 1) return Math.round(s * 1000) + "ms";
  if (s < 120) return s.toFixed(1) + "s";
  const t = Math.round(s);
  return Math.floor(t / 60) + "m" + String(t % 60).padStart(2, "0") + "s";
}

function num(v, digits) { return v === null || v === undefined ? "-" : v.toFixed(digits); }

function stateText(m) {
  const p = m.llamad.load_progress;
  if (!p) return m.llamad.state;
  if (p.fraction === null) return "loading " + secs(p.elapsed_s);
  return "loading " + Math.round(p.fraction * 100) + "%";
}

// What a model holds when measured, beside what it was estimated to need before it ran.
function memory(g, m) {
  const est = g.estimate_bytes ? "est. " + size(g.estimate_bytes) : "";
  if (g.footprint_bytes) return size(g.footprint_bytes) + (est ? " (" + est + ")" : "");
  return est || size(m.llamad.size_bytes);
}

function renderModels(models) {
  const body = $("#models tbody");
  body.replaceChildren();
  for (const m of models) {
    const g = m.gateway || {};
    const tr = el("tr");
    tr.dataset.model = m.id;
    const name = el("td", m.id + (m.llamad.host ? " @" + m.llamad.host : ""));
    // A template the model does not carry (a built-in one, or none), in a line of its own.
    if (m.template_note) name.append(el("div", "template: " + m.template_note, "muted template"));
    // Why its prompt cache is not kept across processes, and what keeping it would cost.
    if (m.cache_note) name.append(el("div", "prompt cache off: " + m.cache_note, "muted cache"));
    const figures = restoreFigures(m.cache);
    if (figures) name.append(el("div", figures, "muted restores"));
    tr.append(name);
    tr.append(el("td", stateText(m), "state " + m.llamad.state));
    tr.append(el("td", kind(m, g)));
    tr.append(el("td", (m.llamad.aliases || []).join(", ") || "-"));
    tr.append(el("td", memory(g, m)));
    tr.append(el("td", g.idle_left_s === null || g.idle_left_s === undefined ? "-" : secs(g.idle_left_s)));
    tr.append(el("td", g.in_flight ?? "-"));
    tr.append(el("td", g.queued ?? "-"));
    tr.append(el("td", g.requests_per_min ?? "-"));
    tr.append(el("td", num(g.tokens_per_s, 1)));
    tr.append(el("td", g.ttft_p50_s === undefined ? "-" : secs(g.ttft_p50_s)));
    tr.append(el("td", g.cache_hit_ratio == null ? "-" : Math.round(g.cache_hit_ratio * 100) + "%"));
    const actions = el("td");
    if (!m.llamad.host) {
      for (const verb of ["load", "unload", "restart"]) {
        const b = el("button", verb);
        b.type = "button";
        b.dataset.verb = verb;
        b.addEventListener("click", () => act(m.id, verb, b));
        actions.append(b, " ");
      }
    }
    tr.append(actions);
    body.append(tr);
  }
}

// What its prompt cache across processes did: restores, those the next request reused,
// the tokens they saved, the restore time, and the bytes its saved slots hold.
function restoreFigures(c) {
  if (!c || (!c.bytes && !(c.restores && c.restores.restores))) return null;
  const parts = [];
  const r = c.restores;
  if (r && r.restores) {
    parts.push(r.restores + " restores", r.hits + " reused", r.tokens_saved + " tokens saved");
    if (r.restore_ms_p50 !== null) parts.push("restore " + r.restore_ms_p50 + "/" + r.restore_ms_p95 + " ms p50/p95");
  }
  if (c.bytes) parts.push(size(c.bytes) + " on disk");
  return "prompt cache: " + parts.join(", ");
}

// How the gateway loads and stops it: on demand or always on, pinned, its group and set.
function kind(m, g) {
  const parts = [m.llamad.on_demand ? "on demand" : "always on"];
  if (g.pinned) parts.push("pinned");
  if (g.group) parts.push("group " + g.group);
  if (g.exclusive) parts.push("exclusive " + g.exclusive);
  return parts.join(", ");
}

// Names that choose, and what each means now.
function renderSets(gw) {
  const names = Object.entries(gw.names || {});
  $("#sets").textContent = names.map(([name, n]) =>
    name + " \u2192 " + (n.now || "none") + " (of " + n.models.join(", ") + ")").join("; ");
}

// The last stops, newest first, each with why: the status document's recent_stops.
const CAUSES = {
  memory: (s) => "evicted: not enough memory for " + s.for_model,
  max_loaded: (s) => "evicted: max_loaded reached, room for " + s.for_model,
  exclusive: (s) => "evicted: " + s.for_model + " is in exclusive set " + s.set + " with it",
  group: (s) => "stopped with its group " + s.set + (s.for_model ? ", for " + s.for_model : ""),
  idle_timeout: () => "idle timeout",
  unload: () => "unloaded on request (unload, or a client's keep_alive 0)",
};

function renderStops(gw) {
  const list = $("#stops");
  list.replaceChildren();
  const stops = gw.recent_stops || [];
  if (stops.length) list.append(el("li", "recent stops:"));
  for (const s of stops) {
    const why = (CAUSES[s.cause] || (() => s.cause || s.reason))({...s, for_model: s.for_model || "?"});
    const ago = secs(Math.max(0, Date.now() / 1000 - s.at));
    list.append(el("li", s.model + ", " + ago + " ago: " + why));
  }
}

function fillBar(bar, held, total) {
  bar.replaceChildren();
  for (const [name, bytes] of held) {
    const part = el("span", name + " " + size(bytes));
    part.style.width = Math.max(0.5, (100 * bytes) / (total || 1)) + "%";
    part.style.background = colour(name);
    part.title = name + ": " + size(bytes);
    bar.append(part);
  }
}

function renderMemory(gw, models) {
  const budget = gw.budget_bytes;
  const live = models.filter((m) => m.gateway && ["starting", "running", "stopping"].includes(m.llamad.state));
  const held = live.map((m) => [m.id, m.gateway.footprint_bytes || m.gateway.estimate_bytes || 0]);
  fillBar($("#memory"), held, budget || held.reduce((a, h) => a + h[1], 0));
  $("#memory-text").textContent = budget === null || budget === undefined
    ? "no memory budget; models hold " + size(gw.used_bytes)
    : "budget " + size(budget) + " (" + gw.memory_budget + "), used " + size(gw.used_bytes) + ", left " + size(gw.left_bytes);
  // Each GPU (or Metal's working set) beside RAM: its own budget and the models on it.
  const devices = $("#devices");
  devices.replaceChildren();
  for (const d of gw.devices || []) {
    const bar = el("div", null, "bar");
    bar.setAttribute("aria-label", d.name + " memory");
    const held = Object.entries(d.models || {});
    fillBar(bar, held, d.budget_bytes || d.used_bytes);
    const text = d.budget_bytes === null || d.budget_bytes === undefined
      ? "no budget; models hold " + size(d.used_bytes)
      : "budget " + size(d.budget_bytes) + ", used " + size(d.used_bytes) + ", left " + size(d.left_bytes);
    devices.append(el("h3", d.name + " (" + d.description + ")"), bar, el("p", text, "muted"));
  }
}

function renderFleet(peers) {
  $("#fleet-section").hidden = !peers;
  const body = $("#fleet tbody");
  body.replaceChildren();
  for (const p of peers || []) {
    const host = p.name + (p.gateway ? " (" + p.gateway.replace(/^https?:\/\//, "") + ")" : "");
    if (p.away || !p.models.length) {
      const tr = el("tr");
      tr.dataset.host = p.name;
      tr.append(el("td", host), el("td", "-"),
        el("td", p.away ? "away: " + p.away : "no models", "state " + (p.away ? "failed" : "")),
        el("td", "-"), el("td", "-"));
      body.append(tr);
      continue;
    }
    for (const m of p.models) {
      const tr = el("tr");
      tr.dataset.host = p.name;
      tr.dataset.model = m.name;
      tr.append(el("td", host), el("td", m.name), el("td", m.state, "state " + m.state),
        el("td", m.on_demand ? "on demand" : "always on"), el("td", m.aliases.join(", ") || "-"));
      body.append(tr);
    }
  }
}

function renderKeys(keys) {
  const body = $("#keys tbody");
  body.replaceChildren();
  for (const [name, u] of Object.entries(keys || {})) {
    const tr = el("tr");
    for (const v of [name === "-" ? "(no key)" : name, u.requests, u.errors, u.prompt_tokens, u.completion_tokens]) tr.append(el("td", v));
    body.append(tr);
  }
}

function fillSelect(sel, names) {
  const keep = sel.value;
  if ([...sel.options].map((o) => o.value).join() === names.join()) return;
  sel.replaceChildren(...names.map((n) => { const o = el("option", n); o.value = n; return o; }));
  if (names.includes(keep)) sel.value = keep;
}

async function refresh() {
  const doc = await (await api("/ui/api/status")).json();
  $("#listen").textContent = "on " + doc.gateway.listen;
  renderModels(doc.models);
  renderSets(doc.gateway);
  renderStops(doc.gateway);
  renderMemory(doc.gateway, doc.models);
  renderKeys(doc.gateway.keys);
  renderFleet(doc.fleet);
  fillSelect($("#play-model"), doc.models.map((m) => m.id));
  fillSelect($("#log-model"), doc.models.filter((m) => !m.llamad.host).map((m) => m.id));
}

function soon() {
  if (refreshing) return;
  refreshing = setTimeout(() => { refreshing = null; refresh().catch(() => {}); }, 150);
}

async function act(model, verb, button) {
  $("#action-error").textContent = "";
  button.disabled = true;
  try {
    const r = await api("/ui/api/models/" + encodeURIComponent(model) + "/" + verb, { method: "POST" });
    if (!r.ok) $("#action-error").textContent = model + ": " + ((await r.json()).error || {}).message;
  } catch (e) {
    $("#action-error").textContent = model + ": " + e.message;
  } finally {
    button.disabled = false;
    soon();
  }
}

function activityRow(r) {
  const tr = el("tr");
  tr.dataset.model = r.instance || r.model;
  const t = new Date(r.time * 1000).toLocaleTimeString();
  const tokens = (r.prompt_tokens ?? "-") + " / " + (r.completion_tokens ?? "-");
  // Of the prompt: tokens taken from the cache, and those evaluated.
  const cache = (r.prompt_cached ?? "-") + " / " + (r.prompt_evaluated ?? "-");
  const cells = [t, r.model + (r.peer ? " @" + r.host : ""), r.route, r.status, r.key || "-", r.client || "-",
    secs(r.queue_s + r.load_s), secs(r.ttft_s), secs(r.duration_s), tokens, cache, num(r.tokens_per_s, 1)];
  cells.forEach((c, i) => tr.append(el("td", c, i === 3 && r.status >= 400 ? "err" : "")));
  return tr;
}

// A record has no id: its arrival time, length and model tell it apart from any other.
function same(a, b) { return a.time === b.time && a.duration_s === b.duration_s && a.model === b.model; }

function addRecord(r) {
  if (records.some((x) => same(x, r))) return;
  records.unshift(r);
  records = records.slice(0, 200);
  const body = $("#activity tbody");
  body.prepend(activityRow(r));
  while (body.children.length > 50) body.lastChild.remove();
  draw();
}

// One uPlot chart per figure: x is the request's time, one series per model (null where
// another model's request fell), lines drawn across those gaps.
const charts = {};

function chartData(field) {
  const pts = records.filter((r) => r[field] !== null && r[field] !== undefined && r.status < 400).reverse();
  const models = [...new Set(pts.map((r) => r.instance || r.model))];
  const data = [pts.map((r) => r.time)];
  for (const m of models) data.push(pts.map((r) => ((r.instance || r.model) === m ? r[field] : null)));
  return { models, data };
}

function short(v) {
  if (v === null) return "";
  if (Math.abs(v) >= 1000) return +(v / 1000).toFixed(1) + "k";
  return String(+v.toFixed(2));
}

function plot(box, field, unit) {
  const { models, data } = chartData(field);
  let chart = charts[box.id];
  if (chart && chart.models.join() === models.join()) {
    chart.plot.setData(data);
    return;
  }
  if (chart) chart.plot.destroy();
  box.replaceChildren();
  if (!models.length) {
    box.append(el("p", "no requests yet", "empty"));
    delete charts[box.id];
    return;
  }
  const series = [{}].concat(models.map((m) => ({
    label: m, stroke: colour(m), width: 1.5, spanGaps: true, points: { show: true, size: 5 },
    value: (u, v) => (v === null || v === undefined ? "-" : v.toFixed(v < 10 ? 2 : 1) + unit),
  })));
  const opts = { width: Math.max(200, box.clientWidth - 2), height: 150, series,
    scales: { y: { range: (u, lo, hi) => [0, hi > 0 ? hi * 1.1 : 1] } },
    axes: [{}, { size: 56, values: (u, vs) => vs.map(short) }] };
  charts[box.id] = { models, plot: new uPlot(opts, data, box) };
}

function draw() { plot($("#speed"), "tokens_per_s", " tok/s"); plot($("#ttft"), "ttft_s", " s"); }

window.addEventListener("resize", () => {
  for (const [id, c] of Object.entries(charts)) c.plot.setSize({ width: Math.max(200, $("#" + id).clientWidth - 2), height: 150 });
});

async function loadActivity() {
  const doc = await (await api("/v1/activity?limit=200")).json();
  records = [];
  $("#activity tbody").replaceChildren();
  for (const r of doc.data.slice().reverse()) addRecord(r);
}

async function* sse(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
      if (data) yield data;
    }
  }
}

async function follow() {
  for (let first = true; ; first = false) {
    try {
      const r = await api("/v1/events");
      // Requests that ended while the stream was down are only in the activity: read it
      // again once the stream is open, so none falls in between.
      if (!first) await loadActivity();
      $("#live").classList.add("on");
      for await (const data of sse(r)) {
        const ev = JSON.parse(data);
        if (ev.type === "request") addRecord(ev);
        soon();
      }
    } catch (e) {
      if (e instanceof NeedKey) return showLogin("the key was refused");
    }
    $("#live").classList.remove("on");
    await new Promise((ok) => setTimeout(ok, 2000));
  }
}

async function play() {
  const out = $("#play-out");
  out.textContent = "";
  const body = { model: $("#play-model").value, stream: true, max_tokens: 256,
    messages: [{ role: "user", content: $("#play-input").value }] };
  $("#play-send").disabled = true;
  try {
    const r = await api("/v1/chat/completions", { method: "POST", body: JSON.stringify(body),
      headers: { "Content-Type": "application/json" } });
    if (!r.ok) { out.textContent = ((await r.json()).error || {}).message; return; }
    for await (const data of sse(r)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) { out.textContent += "\n[" + chunk.error.message + "]"; break; }
      for (const c of chunk.choices || []) out.textContent += (c.delta && c.delta.content) || "";
    }
  } finally {
    $("#play-send").disabled = false;
  }
}

async function showLog() {
  const name = $("#log-model").value;
  if (!name) return;
  const doc = await (await api("/ui/api/models/" + encodeURIComponent(name) + "/logs")).json();
  $("#log").textContent = (doc.lines || []).join("\n");
  $("#log").scrollTop = $("#log").scrollHeight;
}

function showLogin(message) {
  $("#main").hidden = true;
  $("#login").hidden = false;
  $("#login-error").textContent = message || "";
  $("#key").focus();
}

async function start() {
  try {
    await refresh();
  } catch (e) {
    if (e instanceof NeedKey) return showLogin(key ? "the key was refused" : "");
    throw e;
  }
  $("#login").hidden = true;
  $("#main").hidden = false;
  await loadActivity();
  follow();
  setInterval(() => refresh().catch(() => {}), 2000);
}

$("#login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  key = $("#key").value.trim();
  sessionStorage.setItem("llamad-key", key);
  start();
});
$("#play-send").addEventListener("click", () => play().catch((e) => { $("#play-out").textContent = e.message; }));
$("#log-show").addEventListener("click", () => showLog().catch(() => {}));
start();
