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
// The audit page shown: null is the newest; "pages" holds the cursors of the newer pages.
let auditCursor = null, nextCursor = null;
const pages = [];
const olderButton = document.getElementById("older"), newerButton = document.getElementById("newer");

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
    const page = {order: "newest", limit: "50"};
    if (auditCursor) page.cursor = auditCursor;
    const [approvals, sessions, audit] = await Promise.all([
      api("GET", "/v1/approvals?" + query(["tenant_id"])), api("GET", "/v1/sessions?" + query(["tenant_id"])),
      api("GET", "/v1/audit?" + query(["tenant_id", "session_id", "tool"], page))]);
    nextCursor = audit.next_cursor;
    olderButton.disabled = !nextCursor;
    newerButton.disabled = pages.length === 0;
    fill("approvals", approvals, (row, a) => {
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
    fill("sessions", sessions, (row, s) => {
      row.dataset.session = s.id;
      cell(row, s.id); cell(row, s.tenant_id); cell(row, s.profile); cell(row, s.image || "default"); cell(row, s.memory);
      cell(row, new Date(s.created * 1000).toLocaleTimeString());
      const b = document.createElement("button");
      b.textContent = "Close"; b.dataset.close = s.id;
      b.addEventListener("click", () => closeSession(s.id).catch(e => statusLine.textContent = e.message));
      row.insertCell().appendChild(b);
    });
    fill("audit", audit.items, (row, e) => {
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
  auditCursor = null; pages.length = 0;
  refresh();
});
olderButton.addEventListener("click", () => { pages.push(auditCursor); auditCursor = nextCursor; refresh(); });
newerButton.addEventListener("click", () => { auditCursor = pages.pop() || null; refresh(); });

document.getElementById("login").addEventListener("submit", ev => {
  ev.preventDefault();
  sessionStorage.setItem("caisson-key", keyBox.value);
  refresh();
});
refresh();
setInterval(refresh, 1000);
