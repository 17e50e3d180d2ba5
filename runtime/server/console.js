"use strict";
const keyBox = document.getElementById("key");
keyBox.value = sessionStorage.getItem("caisson-key") || "";
const statusLine = document.getElementById("status");

async function api(method, path, body) {
  const headers = {"Authorization": "Bearer " + keyBox.value};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  if (!r.ok) throw new Error(method + " " + path + ": " + r.status + " " + (await r.text()));
  return r.json();
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
  await api("POST", "/approvals/" + encodeURIComponent(id), {decision, message});
  await refresh();
}

async function refresh() {
  if (!keyBox.value) { statusLine.textContent = "enter a tenant API key"; return; }
  try {
    const [approvals, sessions, audit] = await Promise.all([
      api("GET", "/approvals"), api("GET", "/sessions"), api("GET", "/audit?limit=50&order=newest")]);
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
      cell(row, s.id); cell(row, s.profile); cell(row, s.image || "default"); cell(row, s.memory);
      cell(row, new Date(s.created * 1000).toLocaleTimeString());
    });
    fill("audit", audit.items, (row, e) => {
      cell(row, new Date(e.time).toLocaleTimeString()); cell(row, e.session_id); cell(row, e.tool_alias || e.tool);
      cell(row, e.level); cell(row, e.decision, e.decision === "denied" ? "denied" : e.decision === "approved" ? "approved" : "");
      cell(row, e.outcome); cell(row, e.preview);
    });
    statusLine.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    statusLine.textContent = e.message;
  }
}

document.getElementById("login").addEventListener("submit", ev => {
  ev.preventDefault();
  sessionStorage.setItem("caisson-key", keyBox.value);
  refresh();
});
refresh();
setInterval(refresh, 1000);
