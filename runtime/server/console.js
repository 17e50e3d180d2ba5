"use strict";
const keyBox = document.getElementById("key");
keyBox.value = sessionStorage.getItem("caisson-key") || "";
const statusLine = document.getElementById("status");

async function api(method, path, body) {
  const headers = {"Authorization": "Bearer " + keyBox.value};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  if (!r.ok) throw new Error(method + " " + path + ": " + r.status + " " + (await r.text()));
  return r.status === 204 ? null : r.json();
}

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (cls) td.className = cls;
  return td;
}

function fill(id, items, render) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  for (const item of items) render(body.insertRow(), item);
}

async function answer(id, decision) {
  const message = decision === "deny" ? (prompt("Reason for denying (the agent sees it):") || "denied from the console") : null;
  await api("POST", "/v1/approvals/" + encodeURIComponent(id), {decision, message});
  await refresh();
}

const filterBox = {tenant_id: "f-tenant", session_id: "f-session", tool: "f-tool"};

// A paged table: "cursor" is the page shown (null: the first), "back" the cursors of the
// pages before it; "forward" asks for the page after, "backward" for the one before.
function pager(forwardId, backwardId) {
  const p = {cursor: null, next: null, back: [],
    forward: document.getElementById(forwardId), backward: document.getElementById(backwardId)};
  p.forward.addEventListener("click", () => { p.back.push(p.cursor); p.cursor = p.next; refresh(); });
  p.backward.addEventListener("click", () => { p.cursor = p.back.pop() || null; refresh(); });
  return p;
}
function pageParams(p, extra) { return p.cursor ? {...extra, cursor: p.cursor} : extra; }
function shown(p, page) {
  p.next = page.next_cursor;
  p.forward.disabled = !p.next;
  p.backward.disabled = p.back.length === 0;
  return page.items;
}
const pagers = {audit: pager("older", "newer"), sessions: pager("s-next", "s-prev"), closed: pager("c-older", "c-newer")};
const time = seconds => new Date(seconds * 1000).toLocaleTimeString();

function query(names, extra) {
  const params = new URLSearchParams(extra || {});
  for (const name of names) {
    const value = document.getElementById(filterBox[name]).value.trim();
    if (value) params.set(name, value);
  }
  return params.toString();
}

async function closeSession(id) {
  if (!confirm("Close session " + id + "? Its container is removed.")) return;
  await api("DELETE", "/v1/sessions/" + encodeURIComponent(id));
  await refresh();
}

async function refresh() {
  if (!keyBox.value) { statusLine.textContent = "enter an API key"; return; }
  try {
    const [approvals, sessions, closed, audit] = await Promise.all([
      api("GET", "/v1/approvals?" + query(["tenant_id"])),
      api("GET", "/v1/sessions?" + query(["tenant_id"], pageParams(pagers.sessions, {limit: "20"}))),
      api("GET", "/v1/sessions?" + query(["tenant_id"], pageParams(pagers.closed, {state: "closed", order: "newest", limit: "20"}))),
      api("GET", "/v1/audit?" + query(["tenant_id", "session_id", "tool"], pageParams(pagers.audit, {order: "newest", limit: "50"})))]);
    fill("approvals", approvals.items, (row, a) => {
      row.className = "pending"; row.dataset.approval = a.id;
      cell(row, a.id); cell(row, a.session_id); cell(row, a.tool);
      cell(row, a.command || a.paths.join(" ") || a.preview); cell(row, a.reasons.join("; "));
      const td = row.insertCell();
      for (const [label, decision] of [["Approve", "allow_once"], ["Approve for session", "allow_session"], ["Deny", "deny"]]) {
        const b = document.createElement("button");
        b.textContent = label; b.dataset.decision = decision;
        b.addEventListener("click", () => answer(a.id, decision).catch(e => statusLine.textContent = e.message));
        td.appendChild(b);
      }
    });
    fill("sessions", shown(pagers.sessions, sessions), (row, s) => {
      row.dataset.session = s.id;
      cell(row, s.id); cell(row, s.tenant_id); cell(row, s.profile); cell(row, s.image || "default"); cell(row, s.memory);
      cell(row, time(s.created));
      const b = document.createElement("button");
      b.textContent = "Close"; b.dataset.close = s.id;
      b.addEventListener("click", () => closeSession(s.id).catch(e => statusLine.textContent = e.message));
      row.insertCell().appendChild(b);
    });
    fill("closed", shown(pagers.closed, closed), (row, s) => {
      row.dataset.session = s.id;
      cell(row, s.id); cell(row, s.tenant_id); cell(row, time(s.created)); cell(row, time(s.closed)); cell(row, s.closed_reason);
    });
    fill("audit", shown(pagers.audit, audit), (row, e) => {
      row.dataset.tenant = e.tenant; row.dataset.session = e.session_id;
      cell(row, new Date(e.time).toLocaleTimeString()); cell(row, e.session_id); cell(row, e.tool_alias || e.tool);
      cell(row, e.level); cell(row, e.decision, e.decision === "denied" ? "denied" : e.decision === "approved" ? "approved" : "");
      cell(row, e.outcome); cell(row, e.preview);
    });
    statusLine.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    statusLine.textContent = e.message;
  }
}

document.getElementById("filters").addEventListener("submit", ev => {
  ev.preventDefault();
  for (const p of Object.values(pagers)) { p.cursor = null; p.back.length = 0; }
  refresh();
});

document.getElementById("login").addEventListener("submit", ev => {
  ev.preventDefault();
  sessionStorage.setItem("caisson-key", keyBox.value);
  refresh();
});
refresh();
setInterval(refresh, 1000);
