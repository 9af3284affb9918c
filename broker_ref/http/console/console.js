// The broker console: plain JavaScript over the management API (/api/), no build step.
// The browser sends the credentials it logged in with (HTTP basic) with each fetch.
"use strict";

const depthHistory = new Map();  // destination -> depths of the last minute, oldest first
const HISTORY = 60;
let queuePage = { name: "", offset: 0, limit: 20, total: 0 };
let timer = null;

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const resp = await fetch(path, init);
  const data = await resp.json();
  if (!resp.ok) throw new Error(`${resp.status}: ${data.message}`);
  return data;
}

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (cls) td.className = cls;
  return td;
}

function sparkline(values) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", `0 0 ${HISTORY} 24`);
  const top = Math.max(1, ...values);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", values.map((v, i) =>
    `${i + HISTORY - values.length},${23 - (v / top) * 22}`).join(" "));
  svg.appendChild(line);
  return svg;
}

function setStatus(text, error) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = error ? "error" : "";
}

async function showDestinations() {
  const data = await api("GET", "/api/destinations");
  const body = document.querySelector("#destinations tbody");
  body.replaceChildren();
  for (const d of data.destinations) {
    const history = depthHistory.get(d.name) || [];
    history.push(d.messageCount);
    if (history.length > HISTORY) history.shift();
    depthHistory.set(d.name, history);
    const row = body.insertRow();
    row.dataset.name = d.name;
    const name = cell(row, "");
    if (d.kind === "queue") {
      const link = document.createElement("a");
      link.href = `#queue/${encodeURIComponent(d.name)}`;
      link.textContent = d.name;
      name.appendChild(link);
    } else {
      name.textContent = d.name;
    }
    cell(row, d.kind);
    cell(row, d.messageCount, "num depth");
    row.insertCell().appendChild(sparkline(history));
    cell(row, d.deliveringCount, "num");
    cell(row, d.consumerCount, "num");
    cell(row, d.enqueued, "num enqueued");
    cell(row, d.dequeued, "num");
    cell(row, d.deadLettered, "num");
    cell(row, d.memoryUsage, "num");
  }
}

async function showQueue() {
  const q = queuePage;
  document.getElementById("queue-name").textContent = q.name;
  const path = `/api/queues/${encodeURIComponent(q.name)}/messages?offset=${q.offset}&limit=${q.limit}`;
  let data;
  try {
    data = await api("GET", path);
  } catch (err) {
    if (!String(err.message).startsWith("404")) throw err;
    data = { total: 0, messages: [] };  // no such queue (yet): nothing to show
  }
  q.total = data.total;
  document.getElementById("page").textContent =
    `${data.total ? q.offset + 1 : 0}-${q.offset + data.messages.length} of ${data.total}`;
  const body = document.querySelector("#messages tbody");
  body.replaceChildren();
  for (const m of data.messages) {
    const row = body.insertRow();
    row.dataset.id = m.messageId;
    cell(row, m.messageId);
    cell(row, m.bodyEncoding === "json" ? JSON.stringify(m.body) : m.body);
    cell(row, m.priority, "num");
    cell(row, m.properties.JMS_jmspy_OriginalDestination);
    cell(row, m.properties.JMS_jmspy_DeadLetterReason);
    const del = document.createElement("button");
    del.textContent = "Delete";
    del.onclick = () => act("DELETE",
      `/api/queues/${encodeURIComponent(q.name)}/messages/${encodeURIComponent(m.messageId)}`);
    row.insertCell().appendChild(del);
  }
}

// A window's size: "none" when unknown, "unbounded" for the largest a header can ask
// (prefetch-count 0, consumer-window-size: the bound is elsewhere or nowhere).
function count(n) {
  if (n === null || n === undefined) return "none";
  return n >= 2147483647 ? "unbounded" : n;
}

async function showConnections() {
  const data = await api("GET", "/api/connections");
  const body = document.querySelector("#connections tbody");
  body.replaceChildren();
  for (const c of data.connections) {
    const consumers = c.consumers.length ? c.consumers : [null];
    for (const w of consumers) {
      const row = body.insertRow();
      cell(row, c.id, "num");
      cell(row, c.user);
      cell(row, c.clientId);
      cell(row, w && w.id, "num");
      cell(row, w && w.queue);
      cell(row, w ? count(w.limit) : c.flowLimit, "num");
      cell(row, w && w.limitSetBy);
      cell(row, w && w.clientLimit !== null ? `${count(w.clientLimit)} (${w.askedBy})` : "");
      cell(row, w && w.threshold !== null ? `${w.threshold} %` : "", "num");
      cell(row, w && w.unconsumed, "num");
      cell(row, w && w.credit, "num");
      cell(row, w && w.delivering, "num");
      const close = document.createElement("button");
      close.textContent = "Close";
      close.onclick = () => act("DELETE", `/api/connections/${c.id}`);
      row.insertCell().appendChild(close);
    }
  }
}

async function act(method, path) {
  const result = document.getElementById("result");
  try {
    const data = await api(method, path);
    result.textContent = JSON.stringify(data);
    result.className = "";
  } catch (err) {
    result.textContent = err.message;
    result.className = "error";
  }
  await refresh();
}

function view() {
  const hash = decodeURIComponent(location.hash.slice(1)) || "destinations";
  if (hash.startsWith("queue/")) {
    const name = hash.slice("queue/".length);
    if (name !== queuePage.name) queuePage = { name, offset: 0, limit: 20, total: 0 };
    return "queue";
  }
  return hash === "connections" ? "connections" : "destinations";
}

async function refresh() {
  const current = view();
  for (const v of ["destinations", "queue", "connections"]) {
    document.getElementById(`${v}-view`).hidden = v !== current;
  }
  try {
    if (current === "destinations") await showDestinations();
    else if (current === "queue") await showQueue();
    else await showConnections();
    setStatus(`updated ${new Date().toLocaleTimeString()}`, false);
  } catch (err) {
    setStatus(err.message, true);
  }
}

document.getElementById("retry").onclick = () =>
  act("POST", `/api/queues/${encodeURIComponent(queuePage.name)}/retry`);
document.getElementById("purge").onclick = () =>
  act("DELETE", `/api/queues/${encodeURIComponent(queuePage.name)}/messages`);
document.getElementById("prev").onclick = () => {
  queuePage.offset = Math.max(0, queuePage.offset - queuePage.limit);
  refresh();
};
document.getElementById("next").onclick = () => {
  if (queuePage.offset + queuePage.limit < queuePage.total) queuePage.offset += queuePage.limit;
  refresh();
};
window.addEventListener("hashchange", refresh);
refresh();
timer = setInterval(refresh, 1000);
