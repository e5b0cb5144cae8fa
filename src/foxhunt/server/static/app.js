// The foxhunt dashboard: one page over the REST API; live state comes over the WebSocket
// (the account's events as its log gains them), never by polling. The page records its state
// on <html> (data-ready, data-candles, data-fills, data-state, data-errors) for the browser test.
"use strict";

const LC = window.LightweightCharts;
const root = document.documentElement;
const $ = (id) => document.getElementById(id);
const state = { token: null, role: null, account: null, ws: null, candles: null, markers: null,
                equity: null, drawdown: null, bars: [], fills: [], orders: new Map(), jobsWs: null };

function fail(err) {
  const text = String(err && err.message || err);
  root.dataset.errors = (root.dataset.errors ? root.dataset.errors + " | " : "") + text;
}
window.addEventListener("error", (e) => fail(e.message));
window.addEventListener("unhandledrejection", (e) => fail(e.reason));

async function api(path, opts = {}) {
  const headers = { "Content-Type": "application/json" };
  if (state.token) headers.Authorization = "Bearer " + state.token;
  const r = await fetch("/api/v1" + path, { ...opts, headers });
  const body = r.headers.get("content-type")?.includes("json") ? await r.json() : await r.text();
  if (r.status === 401 && state.token) { signOut("session expired: sign in again"); }
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

const sec = (ns) => Math.floor(Number(ns) / 1e9);
const fmtTs = (ns) => new Date(Number(ns) / 1e6).toISOString().slice(0, 19).replace("T", " ");
const money = (x) => Number(x).toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });

// ---- sign in ------------------------------------------------------------------------------
$("login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  $("login-error").textContent = "";
  try {
    const t = await api("/auth/token", { method: "POST", body: JSON.stringify({
      username: $("user").value, password: $("password").value }) });
    $("password").value = "";
    state.token = t.token; state.role = t.role;
    sessionStorage.setItem("foxhunt.token", JSON.stringify(t));
    start(t);
  } catch (err) { $("login-error").textContent = err.message; }
});

function signOut(why) {
  state.token = null; sessionStorage.removeItem("foxhunt.token");
  if (state.ws) state.ws.close();
  document.querySelectorAll(".tab").forEach((m) => (m.hidden = true));
  $("tabs").hidden = true; $("login").hidden = false; $("login-error").textContent = why || "";
}

function start(t) {
  $("login").hidden = true; $("tabs").hidden = false;
  $("who").textContent = `${t.user} (${t.role})`;
  $("kill").disabled = !(t.role === "trader" || t.role === "admin");
  showTab("trading");
  loadAccounts().catch(fail);
}

document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => showTab(b.dataset.tab)));
function showTab(name) {
  document.querySelectorAll(".tab").forEach((m) => (m.hidden = m.id !== name));
  document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("on", b.dataset.tab === name));
  if (name === "runs") loadRuns().catch(fail);
  if (name === "studies") loadStudies().catch(fail);
  if (name === "jobs") loadJobs().catch(fail);
}

// ---- trading ------------------------------------------------------------------------------
const chartOpts = (el) => ({ width: el.clientWidth, height: el.clientHeight,
  layout: { background: { color: "#171e26" }, textColor: "#d6dde6" },
  grid: { vertLines: { color: "#222b35" }, horzLines: { color: "#222b35" } },
  timeScale: { timeVisible: true, secondsVisible: false } });

function charts() {
  if (state.candles) return;
  const c = LC.createChart($("candles"), chartOpts($("candles")));
  state.candles = c.addSeries(LC.CandlestickSeries, { upColor: "#26a69a", downColor: "#ef5350",
    borderVisible: false, wickUpColor: "#26a69a", wickDownColor: "#ef5350" });
  state.position = c.addSeries(LC.HistogramSeries, { priceScaleId: "pos", color: "#4f7cac" });
  c.priceScale("pos").applyOptions({ scaleMargins: { top: 0.88, bottom: 0 } });
  c.priceScale("right").applyOptions({ scaleMargins: { top: 0.05, bottom: 0.15 } });
  state.markers = LC.createSeriesMarkers(state.candles, []);
  const e = LC.createChart($("equity-chart"), chartOpts($("equity-chart")));
  state.equity = e.addSeries(LC.LineSeries, { color: "#6fa8dc", lineWidth: 2 });
  state.drawdown = e.addSeries(LC.AreaSeries, { priceScaleId: "dd", lineColor: "#ef5350",
    topColor: "rgba(239,83,80,0.05)", bottomColor: "rgba(239,83,80,0.4)" });
  e.priceScale("dd").applyOptions({ scaleMargins: { top: 0.7, bottom: 0 } });
  state.charts = [c, e];
  window.addEventListener("resize", () => state.charts.forEach((ch) =>
    ch.applyOptions({ width: ch.chartElement().parentElement.clientWidth })));
}

async function loadAccounts() {
  const accounts = await api("/accounts");
  const sel = $("account");
  sel.innerHTML = accounts.map((a) => `<option>${a}</option>`).join("");
  sel.onchange = () => openAccount(sel.value).catch(fail);
  root.dataset.ready = "1";
  if (accounts.length) await openAccount(accounts[0]);
}

async function openAccount(account) {
  charts();
  if (state.ws) state.ws.close();
  state.account = account; state.fills = []; state.orders.clear();
  const [bars, eq, orders] = await Promise.all([api(`/accounts/${account}/bars?last=2000`),
    api(`/accounts/${account}/equity`), api(`/accounts/${account}/orders?last=200`)]);
  state.bars = bars.ts.map((t, i) => ({ time: sec(t), open: bars.open[i], high: bars.high[i],
                                       low: bars.low[i], close: bars.close[i] }));
  state.candles.setData(state.bars);
  state.equity.setData(eq.ts.map((t, i) => ({ time: sec(t), value: eq.equity[i] })));
  state.drawdown.setData(eq.ts.map((t, i) => ({ time: sec(t), value: eq.drawdown[i] })));
  orders.orders.forEach((o) => state.orders.set(o.client_order_id, o));
  const events = await api(`/accounts/${account}/events?after=0&limit=10000`);
  events.filter((e) => e.kind === "order_filled").forEach((e) => {
    addFill(e);
    const o = state.orders.get(e.client_order_id);
    if (o) o.avg_px = e.price;
  });
  drawMarkers(); drawOrders(); root.dataset.candles = state.bars.length;
  stream(account);
}

function stream(account) {
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/v1/ws/accounts/${account}`);
  state.ws = ws;
  ws.onopen = () => ws.send(JSON.stringify({ token: state.token }));
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.type === "welcome") { $("stream").textContent = "stream: live"; return; }
    if (msg.type === "error") { fail(msg.error); return; }
    if (msg.type === "snapshot" || msg.type === "events") {
      (msg.events || []).forEach(onEvent);
      (msg.bars || []).forEach(onBar);
      showRisk(msg.risk); showPositions(msg.positions);
      if (msg.events) { drawMarkers(); drawOrders(); }
    }
  };
  ws.onclose = () => { if (state.ws === ws) $("stream").textContent = "stream: closed"; };
}

function onEvent(e) {
  if (e.kind === "price_marked") {
    const t = sec(e.ts_ns), px = Number(e.price);
    const last = state.bars[state.bars.length - 1];
    if (!last || t > last.time) {
      const bar = { time: t, open: last ? last.close : px, high: px, low: px, close: px };
      state.bars.push(bar); state.candles.update(bar);
    } else if (t === last.time) {
      last.close = px; last.high = Math.max(last.high, px); last.low = Math.min(last.low, px);
      state.candles.update(last);
    }
    root.dataset.candles = state.bars.length;
  } else if (e.kind === "order_filled") {
    addFill(e);
  }
  if (e.client_order_id) {
    const o = state.orders.get(e.client_order_id) || { client_order_id: e.client_order_id, filled: 0 };
    if (e.kind === "order_initialized") Object.assign(o, { side: e.side, quantity: e.quantity,
      type: e.order_type, tag: e.tag, status: "INITIALIZED", ts_init: e.ts_ns });
    else if (e.kind === "order_filled") { o.filled = (o.filled || 0) + e.quantity; o.avg_fill_ticks = null;
      o.avg_px = e.price; o.status = o.filled >= o.quantity ? "FILLED" : "PARTIALLY_FILLED"; }
    else o.status = e.kind.replace("order_", "").toUpperCase();
    o.ts_last = e.ts_ns;
    state.orders.set(e.client_order_id, o);
  }
}

// A live trader's journaled bar: the candle as the feed built it (a mark gives only its close).
function onBar(b) {
  const bar = { time: sec(b.ts_ns), open: b.open, high: b.high, low: b.low, close: b.close };
  const last = state.bars[state.bars.length - 1];
  if (last && bar.time < last.time) return;
  if (last && bar.time === last.time) state.bars[state.bars.length - 1] = bar; else state.bars.push(bar);
  state.candles.update(bar);
  root.dataset.candles = state.bars.length;
}

function addFill(e) {
  state.fills.push({ time: sec(e.ts_ns), side: e.side, qty: e.quantity, price: Number(e.price) });
  root.dataset.fills = state.fills.length;
}

function drawMarkers() {
  if (!state.bars.length) return;
  const times = state.bars.map((b) => b.time);
  const snap = (t) => { let lo = 0, hi = times.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (times[mid] <= t) lo = mid; else hi = mid - 1; }
    return times[lo]; };
  state.markers.setMarkers(state.fills.slice(-500).map((f) => ({ time: snap(f.time),
    position: f.side === "BUY" ? "belowBar" : "aboveBar", shape: f.side === "BUY" ? "arrowUp" : "arrowDown",
    color: f.side === "BUY" ? "#26a69a" : "#ef5350", text: `${f.side === "BUY" ? "+" : "-"}${f.qty}` }))
    .sort((a, b) => a.time - b.time));
}

function drawOrders() {
  const rows = [...state.orders.values()].slice(-50).reverse();
  $("orders").tBodies[0].innerHTML = rows.map((o) => `<tr><td>${o.client_order_id}</td>
    <td class="${String(o.side).toLowerCase()}">${o.side}</td><td>${o.quantity ?? ""}</td><td>${o.filled ?? ""}</td>
    <td>${o.type ?? ""}</td><td>${o.status}</td><td>${o.avg_px ?? ""}</td><td>${o.tag ?? ""}</td>
    <td>${o.ts_last ? fmtTs(o.ts_last) : ""}</td></tr>`).join("");
}

function showRisk(r) {
  if (!r) return;
  const badge = $("state");
  badge.textContent = r.trading_state + (r.kill_switch ? " (kill switch)" : "");
  badge.className = "badge " + r.trading_state;
  root.dataset.state = r.trading_state;
  const lim = r.limits || {};
  $("risk").innerHTML = `<dl><dt>reason</dt><dd>${r.reason || "-"}</dd><dt>equity</dt><dd>${money(r.equity)}</dd>
    <dt>daily loss</dt><dd>${money(r.daily_loss)} of ${lim.daily_loss_limit || "no limit"}</dd>
    <dt>drawdown</dt><dd>${money(r.drawdown)} of ${lim.max_drawdown || "no limit"}</dd>
    <dt>orders today</dt><dd>${r.orders_today} of ${lim.max_orders_per_day}</dd>
    <dt>working orders</dt><dd>${r.working_orders}</dd><dt>max position</dt><dd>${lim.max_position}</dd></dl>`;
}

function showPositions(p) {
  if (!p) return;
  const pos = p.positions.map((x) => `${x.symbol} ${x.position > 0 ? "+" : ""}${x.position}`).join(", ") || "flat";
  $("position").textContent = "position " + pos;
  $("equity").textContent = `equity ${money(p.equity)} ${p.currency}`;
  const last = state.bars[state.bars.length - 1];
  if (!last) return;
  later(state.position, { time: last.time, value: p.positions.reduce((s, x) => s + x.position, 0) });
  later(state.equity, { time: last.time, value: Number(p.equity) });
}

// A point that is not older than the series' newest (the REST history and the stream overlap).
const newest = new WeakMap();
function later(series, point) {
  if (newest.has(series) ? newest.get(series) <= point.time : true) {
    const data = newest.has(series) ? null : series.data();
    if (data && data.length && data[data.length - 1].time > point.time) return;
    series.update(point); newest.set(series, point.time);
  }
}

$("kill").addEventListener("click", () => { $("kill-confirm").hidden = false; });
$("kill-confirm").addEventListener("click", async () => {
  $("kill-confirm").hidden = true;
  try {
    const r = await api(`/accounts/${state.account}/risk/kill`, { method: "POST",
      body: JSON.stringify({ reason: "kill switch from the dashboard" }) });
    showRisk(r);
  } catch (err) { fail(err); }
});

// ---- runs, studies, jobs ------------------------------------------------------------------
async function loadRuns() {
  const runs = await api("/runs");
  $("run-list").innerHTML = runs.map((r) => `<li data-run="${r.name}">${r.name}<br><span class="muted">
    ${r.symbol ?? ""} ${r.bars ?? ""} · ${r.folds} folds · ${r.deployed} deployed${r.finished ? "" : " · running"}</span></li>`).join("");
  $("run-list").querySelectorAll("li").forEach((li) => li.addEventListener("click", () => showRun(li.dataset.run).catch(fail)));
}

async function showRun(name) {
  $("run-list").querySelectorAll("li").forEach((li) => li.classList.toggle("on", li.dataset.run === name));
  const [run, curves] = await Promise.all([api(`/runs/${name}`), api(`/runs/${name}/curves`)]);
  $("run-title").textContent = name;
  const sharpe = (m) => (m && m.sharpe != null ? Number(m.sharpe).toFixed(2) : "-");
  $("folds").tBodies[0].innerHTML = run.folds.map((f, i) => `<tr><td>${f.index ?? i}</td><td>${f.deploy ? "yes" : "no"}</td>
    <td>${sharpe(f.val || f.validation)}</td><td>${sharpe(f.test)}</td><td>${f.verdict ?? ""}</td></tr>`).join("");
  const el = $("curves"); el.innerHTML = "";
  const chart = LC.createChart(el, { ...chartOpts(el), timeScale: { tickMarkFormatter: (t) => String(t) } });
  const colors = ["#6fa8dc", "#f0b429", "#26a69a", "#ef5350", "#b39ddb", "#90a4ae"];
  const byFold = new Map();
  curves.forEach((line) => { if (!byFold.has(line.fold)) byFold.set(line.fold, []);
    byFold.get(line.fold).push({ time: line.epoch + 1, value: line.val ? line.val.sharpe : null }); });
  [...byFold.entries()].forEach(([fold, pts], i) => chart.addSeries(LC.LineSeries, { color: colors[i % colors.length],
    title: `fold ${fold}` }).setData(pts.filter((p) => p.value != null)));
  root.dataset.run = name;
}

async function loadStudies() {
  const studies = await api("/studies");
  $("study-list").tBodies[0].innerHTML = studies.map((s) => `<tr><td>${s.name}</td><td>${s.trials}</td>
    <td>${s.metric ?? ""}</td><td>${s.best ? JSON.stringify(s.best.value ?? s.best).slice(0, 60) : "-"}</td></tr>`).join("");
}

async function loadJobs() {
  let jobs;
  try { jobs = await api("/jobs"); } catch (err) { $("job-list").tBodies[0].innerHTML = `<tr><td colspan="7">${err.message}</td></tr>`; return; }
  renderJobs(jobs.jobs || jobs);
  if (state.jobsWs) return;
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/v1/ws/jobs`);
  state.jobsWs = ws;
  ws.onopen = () => ws.send(JSON.stringify({ token: state.token }));
  ws.onmessage = (m) => { const msg = JSON.parse(m.data); if (msg.type === "jobs") renderJobs(msg.jobs); };
  ws.onclose = () => { state.jobsWs = null; };
}

function renderJobs(jobs) {
  const canCancel = state.role === "trader" || state.role === "admin";
  $("job-list").tBodies[0].innerHTML = jobs.map((j) => {
    const p = j.progress || {};
    const pct = p.fraction != null ? ` ${(100 * p.fraction).toFixed(0)}%` : "";
    const live = j.state === "queued" || j.state === "running";
    return `<tr><td>${j.id}</td><td>${j.kind}</td><td>${j.state}</td><td>${(p.phase || "")}${pct}</td>
      <td>${j.submitted_by ?? ""}</td><td>${(j.submitted_at || "").slice(0, 19).replace("T", " ")}</td>
      <td>${canCancel && live ? `<button data-cancel="${j.id}">Cancel</button>` : ""}</td></tr>`; }).join("");
  $("job-list").querySelectorAll("button[data-cancel]").forEach((b) => b.addEventListener("click", () =>
    api(`/jobs/${b.dataset.cancel}/cancel`, { method: "POST", body: "{}" }).catch(fail)));
}

// ---- start --------------------------------------------------------------------------------
(function resume() {
  const saved = JSON.parse(sessionStorage.getItem("foxhunt.token") || "null");
  if (saved && saved.expires * 1000 > Date.now() + 5000) { state.token = saved.token; state.role = saved.role; start(saved); }
  else root.dataset.ready = "login";
})();
