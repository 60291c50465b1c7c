// The dashboard of a streams-core application: plain JavaScript over this instance's REST routes.
// /topology is drawn once; /state/instances and every instance's /metrics/{instance} (relayed by
// this instance, so one origin serves everything) are polled every POLL_MS; the key lookup asks
// /state/instance/{store}/{key} for the owner and the state routes for the value.
"use strict";

const POLL_MS = 2000;
const HISTORY = 30; // sparkline points (one minute at POLL_MS)
const COLORS = ["#2f6fdb", "#c7851f", "#1a7f37", "#a4508a", "#b42318", "#0e7490"];
const SVG_NS = "http://www.w3.org/2000/svg";

const view = {
  topology: null, // the /topology answer
  taskOfTopic: new Map(), // source topic (as the brokers name it) -> sub-topology id
  subOfStore: new Map(), // store -> sub-topology id
  samples: new Map(), // instance -> {time, processed} of the previous poll
  history: new Map(), // instance -> [records/s, ...]
  owner: null, // host:port of the last key lookup's owner
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, parent = null, text = null) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG_NS, tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  if (text !== null) node.textContent = text;
  if (parent) parent.appendChild(node);
  return node;
}

function setStatus(text, isError = false) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", isError);
}

// -- credentials -----------------------------------------------------------------------------
// A server that requires credentials (docs/deploy.md) answers 401. A browser sends the Basic
// credentials it was given for this origin by itself; a token is asked once, on the first 401,
// and kept for the tab's session (sessionStorage), so every fetch below carries it.

const TOKEN_KEY = "streams.token";
let asking = null;

function askToken() {
  if (asking === null) {
    asking = Promise.resolve(window.prompt("This server requires a token (Bearer):") || "").then((token) => {
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      asking = null;
      return token;
    });
  }
  return asking;
}

async function authorized(path, init = {}, retry = true) {
  const headers = new Headers(init.headers || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.set("Authorization", "Bearer " + token);
  const response = await fetch(path, { ...init, headers, credentials: "same-origin" });
  if (response.status === 401 && retry) {
    sessionStorage.removeItem(TOKEN_KEY);
    if (await askToken()) return authorized(path, init, false);
  }
  return response;
}

async function getJson(path) {
  const response = await authorized(path, { headers: { Accept: "application/json" } });
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  return { status: response.status, ok: response.ok, body, servedBy: response.headers.get("X-Served-By") };
}

// -- Prometheus text ------------------------------------------------------------------------

function unescapeLabel(text) {
  return text.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
}

// Samples of the Prometheus text format: [{name, labels, value}], comments skipped.
function parsePrometheus(text) {
  const samples = [];
  const line = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
  const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const raw of text.split("\n")) {
    if (!raw || raw.startsWith("#")) continue;
    const match = line.exec(raw);
    if (!match) continue;
    const labels = {};
    for (const [, name, value] of (match[2] || "").matchAll(label)) labels[name] = unescapeLabel(value);
    samples.push({ name: match[1], labels, value: parseFloat(match[3]) });
  }
  return samples;
}

const named = (samples, name) => samples.filter((s) => s.name === name);
const total = (samples, name) => named(samples, name).reduce((sum, s) => sum + (Number.isFinite(s.value) ? s.value : 0), 0);

// -- topology -------------------------------------------------------------------------------

function indexTopology(topology) {
  const prefix = topology.applicationId + "-";
  for (const sub of topology.subtopologies) {
    if (sub.globalStore) continue;
    for (const node of sub.nodes) {
      for (const topic of node.kind === "source" ? node.topics : []) {
        view.taskOfTopic.set(topic, sub.id);
        view.taskOfTopic.set(prefix + topic, sub.id); // internal topics carry the application id
      }
      for (const store of node.stores) view.subOfStore.set(store, sub.id);
    }
  }
}

function textWidth(text, size) {
  return text.length * size * 0.62; // the graph's fonts are monospace
}

function nodeDetail(node, readers) {
  if (node.kind === "source") return "from " + (node.topicPattern || node.topics.join(", "));
  if (node.kind === "sink") {
    const topic = node.topics[0] || "(topic extractor)";
    const next = readers.get(topic);
    return "to " + topic + (next !== undefined ? ` → sub-topology ${next}` : "");
  }
  return node.stores.length ? "stores: " + node.stores.join(", ") : "";
}

// Layers of a sub-topology: a node's layer is one more than its deepest predecessor's.
function layers(sub) {
  const byName = new Map(sub.nodes.map((n) => [n.name, n]));
  const depth = new Map();
  const depthOf = (node) => {
    if (!depth.has(node.name)) {
      const parents = node.predecessors.map((p) => byName.get(p)).filter(Boolean);
      depth.set(node.name, parents.length ? 1 + Math.max(...parents.map(depthOf)) : 0);
    }
    return depth.get(node.name);
  };
  const columns = [];
  for (const node of sub.nodes) (columns[depthOf(node)] ||= []).push(node);
  return columns;
}

function drawTopology(topology) {
  const readers = new Map(); // topic -> id of the sub-topology whose source reads it
  for (const sub of topology.subtopologies)
    for (const node of sub.nodes) if (node.kind === "source") for (const t of node.topics) readers.set(t, sub.id);

  const NODE_H = 40, GAP_X = 36, GAP_Y = 12, PAD = 12, LABEL_H = 22;
  const bands = topology.subtopologies.map((sub) => {
    const columns = layers(sub).map((nodes) => {
      const width = Math.max(...nodes.map((n) => Math.max(textWidth(n.name, 12), textWidth(nodeDetail(n, readers), 11)))) + 16;
      return { nodes, width };
    });
    const rows = Math.max(...columns.map((c) => c.nodes.length));
    const width = columns.reduce((w, c) => w + c.width, 0) + GAP_X * (columns.length - 1) + 2 * PAD;
    return { sub, columns, width, height: LABEL_H + rows * NODE_H + (rows - 1) * GAP_Y + 2 * PAD };
  });
  const width = Math.max(...bands.map((b) => b.width));
  const height = bands.reduce((h, b) => h + b.height + 10, 0);

  const container = $("topology");
  container.replaceChildren();
  const svg = el("svg:svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "topology graph" }, container);
  svg.style.maxWidth = `${width}px`;
  const defs = el("svg:defs", {}, svg);
  const marker = el("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" }, defs);
  el("svg:path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#8a94a6" }, marker);

  let top = 0;
  for (const band of bands) {
    const group = el("svg:g", { class: "subtopology", "data-id": band.sub.id }, svg);
    el("svg:rect", { class: "band", x: 0.5, y: top + 0.5, width: width - 1, height: band.height, rx: 5 }, group);
    const label = band.sub.globalStore ? `Sub-topology ${band.sub.id} (global store)` : `Sub-topology ${band.sub.id}`;
    el("svg:text", { class: "band-label", x: PAD, y: top + PAD + 10 }, group, label);
    const boxes = new Map();
    let x = PAD;
    for (const column of band.columns) {
      column.nodes.forEach((node, row) => {
        const y = top + PAD + LABEL_H + row * (NODE_H + GAP_Y);
        boxes.set(node.name, { x, y, w: column.width });
        const stateful = node.stores.length ? " stateful" : "";
        const g = el("svg:g", { class: `node ${node.kind}${stateful}`, "data-name": node.name }, group);
        el("svg:title", {}, g, `${node.kind} ${node.name}`);
        el("svg:rect", { x, y, width: column.width, height: NODE_H, rx: 4 }, g);
        el("svg:text", { class: "name", x: x + 8, y: y + 16 }, g, node.name);
        el("svg:text", { class: "detail", x: x + 8, y: y + 31 }, g, nodeDetail(node, readers));
      });
      x += column.width + GAP_X;
    }
    for (const node of band.sub.nodes) {
      const from = boxes.get(node.name);
      for (const next of node.successors) {
        const to = boxes.get(next);
        if (!from || !to) continue;
        const x1 = from.x + from.w, y1 = from.y + NODE_H / 2, x2 = to.x, y2 = to.y + NODE_H / 2, mid = (x1 + x2) / 2;
        el("svg:path", { class: "edge", d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`, "marker-end": "url(#arrow)" }, group);
      }
    }
    top += band.height + 10;
  }
  $("describe").textContent = topology.description;
}

function fillStores(topology) {
  const select = $("lookup-store");
  select.replaceChildren();
  for (const store of topology.stores) {
    el("option", { value: store.name, "data-kind": store.kind }, select, `${store.name} (${store.kind})`);
  }
}

async function loadTopology() {
  const answer = await getJson("topology");
  if (!answer.ok) throw new Error(`/topology answered ${answer.status}`);
  view.topology = answer.body;
  $("app-id").textContent = answer.body.applicationId;
  document.title = `${answer.body.applicationId} · streams-core`;
  indexTopology(answer.body);
  drawTopology(answer.body);
  fillStores(answer.body);
}

// -- instances ------------------------------------------------------------------------------

const hostPort = (m) => `${m.host}:${m.port}`;
const sortedTasks = (tasks) => [...tasks].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));

function activeTasks(member) {
  const tasks = new Set();
  for (const tp of member.topicPartitions) {
    const sub = view.taskOfTopic.get(tp.topic);
    if (sub !== undefined) tasks.add(`${sub}_${tp.partition}`);
  }
  return tasks;
}

// What an instance's metrics tell: its state, lags, processed records and standby tasks.
function readMetrics(samples, active) {
  const state = named(samples, "streams_state").find((s) => s.value === 1);
  const standby = new Set();
  for (const s of named(samples, "streams_store_lag_records")) {
    const sub = view.subOfStore.get(s.labels.store);
    const task = `${sub}_${s.labels.partition}`;
    if (sub !== undefined && !active.has(task)) standby.add(task);
  }
  const pids = new Map(named(samples, "streams_thread_worker_pid").map((s) => [s.labels.thread, s.value]));
  const threads = named(samples, "streams_thread_tasks")
    .filter((s) => s.labels.kind === "active")
    .map((s) => {
      const short = s.labels.thread.replace(/^.*-(StreamThread-\d+)$/, "$1");
      return pids.has(s.labels.thread) ? `${short} (worker ${pids.get(s.labels.thread)})` : short;
    })
    .sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  return {
    state: state ? state.labels.state : "unknown",
    threads,
    recordsLag: total(samples, "streams_partition_records_lag"),
    storeLag: total(samples, "streams_store_lag_records"),
    processed: total(samples, "streams_thread_process_records_total"),
    standby,
  };
}

async function instanceMetrics(name, active) {
  try {
    const response = await authorized("metrics/" + encodeURIComponent(name));
    if (!response.ok) return null;
    return readMetrics(parsePrometheus(await response.text()), active);
  } catch {
    return null;
  }
}

function rate(name, processed, now) {
  const previous = view.samples.get(name);
  view.samples.set(name, { time: now, processed });
  if (!previous || now <= previous.time || processed < previous.processed) return null;
  return (processed - previous.processed) / ((now - previous.time) / 1000);
}

function cell(row, text, className = "") {
  return el("td", className ? { class: className } : {}, row, text);
}

function renderInstances(rows) {
  const body = $("instances").querySelector("tbody");
  body.replaceChildren();
  for (const r of rows) {
    const tr = el("tr", { "data-instance": r.name }, body);
    if (r.name === view.owner) tr.classList.add("owner");
    el("code", {}, cell(tr, ""), r.name);
    const state = r.metrics ? r.metrics.state : "unknown";
    cell(tr, r.metrics ? state : "no metrics", `state-${state}`);
    cell(tr, sortedTasks(r.active).join(", ") || "–");
    cell(tr, r.metrics ? sortedTasks(r.metrics.standby).join(", ") || "–" : "?");
    cell(tr, r.member.storeNames.join(", ") || "–");
    cell(tr, r.member.standbyStoreNames.join(", ") || "–");
    cell(tr, r.metrics ? String(r.metrics.recordsLag) : "?", "num");
    cell(tr, r.metrics ? String(r.metrics.storeLag) : "?", "num");
    cell(tr, r.rate === null ? "…" : r.rate.toFixed(1), "num");
    cell(tr, r.metrics ? r.metrics.threads.join(", ") || "–" : "?");
  }
}

function drawSparkline() {
  const svg = $("sparkline");
  svg.replaceChildren();
  const W = 480, H = 90, PAD = 6;
  const series = [...view.history.entries()];
  const peak = Math.max(1, ...series.flatMap(([, points]) => points));
  const legend = $("sparkline-legend");
  legend.replaceChildren();
  series.forEach(([name, points], i) => {
    const color = COLORS[i % COLORS.length];
    const coords = points.map((v, j) => {
      const x = W - (points.length - 1 - j) * (W / (HISTORY - 1));
      const y = H - PAD - (v / peak) * (H - 2 * PAD);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    if (coords.length > 1) el("svg:polyline", { points: coords.join(" "), fill: "none", stroke: color, "stroke-width": 1.5, "vector-effect": "non-scaling-stroke" }, svg);
    const item = el("span", {}, legend);
    el("span", { class: "swatch", style: `background:${color}` }, item);
    item.appendChild(document.createTextNode(`${name}: ${points.length ? points[points.length - 1].toFixed(1) : "…"}/s`));
  });
  el("svg:text", { x: 4, y: 12, "font-size": 10, fill: "#667085" }, svg, `peak ${peak.toFixed(1)}/s`);
  const now = series.reduce((sum, [, points]) => sum + (points.length ? points[points.length - 1] : 0), 0);
  $("throughput-now").textContent = `${now.toFixed(1)} records/s`;
}

async function refresh() {
  const answer = await getJson("state/instances");
  if (!answer.ok) {
    const reason = answer.body && answer.body.error ? answer.body.error : `status ${answer.status}`;
    setStatus(`Instances not available now (${reason}); retrying…`, answer.status !== 503);
    return;
  }
  const members = [...answer.body].sort((a, b) => hostPort(a).localeCompare(hostPort(b)));
  const now = Date.now();
  const rows = await Promise.all(
    members.map(async (member) => {
      const name = hostPort(member);
      const active = activeTasks(member);
      const metrics = await instanceMetrics(name, active);
      const r = metrics ? rate(name, metrics.processed, now) : null;
      return { name, member, active, metrics, rate: r };
    }),
  );
  for (const name of [...view.history.keys()]) if (!rows.some((r) => r.name === name)) view.history.delete(name);
  for (const r of rows) {
    const points = view.history.get(r.name) || [];
    if (r.rate !== null) points.push(r.rate);
    view.history.set(r.name, points.slice(-HISTORY));
  }
  renderInstances(rows);
  drawSparkline();
  setStatus(`${rows.length} instance${rows.length === 1 ? "" : "s"} · updated ${new Date(now).toLocaleTimeString()}`);
}

// -- key lookup -----------------------------------------------------------------------------

function showLookup(fields) {
  $("lookup-result").hidden = false;
  for (const [id, text] of Object.entries(fields)) $(id).textContent = text;
}

async function lookup(event) {
  event.preventDefault();
  const select = $("lookup-store");
  const store = select.value;
  const kind = select.selectedOptions[0] ? select.selectedOptions[0].dataset.kind : "key-value";
  const key = $("lookup-key").value;
  const path = `${encodeURIComponent(store)}/${encodeURIComponent(key)}`;
  const owner = await getJson(`state/instance/${path}`);
  if (!owner.ok) {
    const error = owner.body && owner.body.error ? owner.body.error : `status ${owner.status}`;
    showLookup({ "lookup-owner": `– (${error})`, "lookup-partition": "–", "lookup-standbys": "–", "lookup-value": "–", "lookup-served-by": owner.servedBy || "–" });
    return;
  }
  view.owner = hostPort(owner.body);
  const lags = new Map((owner.body.copies || []).map((c) => [hostPort(c), c.lag]));
  const lagOf = (h) => (lags.get(hostPort(h)) === null || lags.get(hostPort(h)) === undefined ? "lag ?" : `lag ${lags.get(hostPort(h))}`);
  const standbys = owner.body.standbyHosts.map((h) => `${hostPort(h)} (${lagOf(h)})`).join(", ") || "none";
  const valuePaths = { window: `state/windowed/${path}/0/${Date.now()}`, session: `state/session/${path}` };
  const value = await getJson(valuePaths[kind] || `state/keyvalue/${path}`);
  const windows = (list, none) => list.map((w) => `${new Date(w.windowStart).toISOString()}..${new Date(w.windowEnd).toISOString()}: ${JSON.stringify(w.value)}`).join("; ") || none;
  let shown;
  if (value.ok) shown = kind === "window" ? windows(value.body, "no windows") : kind === "session" ? windows(value.body, "no sessions") : JSON.stringify(value.body.value);
  else shown = value.body && value.body.error ? value.body.error : `status ${value.status}`;
  showLookup({
    "lookup-owner": view.owner,
    "lookup-partition": String(owner.body.partition),
    "lookup-standbys": standbys,
    "lookup-value": shown,
    "lookup-served-by": value.servedBy || "–",
  });
  $("lookup-value").classList.toggle("absent", !value.ok);
  for (const row of $("instances").querySelectorAll("tbody tr")) row.classList.toggle("owner", row.dataset.instance === view.owner);
}

// -- start ----------------------------------------------------------------------------------

async function poll() {
  try {
    if (!view.topology) await loadTopology();
    await refresh();
  } catch (error) {
    setStatus(`Cannot reach this instance (${error.message}); retrying…`, true);
  }
  setTimeout(poll, POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  $("lookup").addEventListener("submit", (event) => {
    lookup(event).catch((error) => showLookup({ "lookup-owner": `– (${error.message})`, "lookup-value": "–" }));
  });
  poll();
});
