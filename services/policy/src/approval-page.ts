/**
 * The approval page: static HTML, CSS and a small script, served under a strict Content-Security-Policy (no
 * inline script, no other origin). The approver types an API key or JWT; it stays in this tab's session storage
 * and travels only as an `Authorization` header to the policy API — no cookie, so no cross-site request can
 * act with it. Everything shown comes from the API and is written with `textContent`, never as HTML: the
 * arguments are the model's and may contain markup.
 */
export const APPROVAL_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Toolgate — approvals</title>
<link rel="stylesheet" href="/approvals/app.css">
</head>
<body>
<header>
  <h1>Pending approvals</h1>
  <span id="who" data-testid="who"></span>
</header>
<main>
  <section id="signin">
    <form id="signin-form">
      <label for="credential">Approver credential (API key or JWT)</label>
      <input id="credential" name="credential" type="password" autocomplete="off" required>
      <button type="submit">Sign in</button>
    </form>
    <p class="hint">The credential stays in this browser tab and is sent only to this service, as an Authorization header.</p>
  </section>
  <section id="queue" hidden>
    <p class="toolbar">
      <button id="refresh" type="button">Refresh</button>
      <button id="signout" type="button">Sign out</button>
      <span id="status" role="status" data-testid="status"></span>
    </p>
    <table id="approvals">
      <thead>
        <tr><th>Tool</th><th>Requested by</th><th>Risk</th><th>Arguments</th><th>Plan hash</th><th>Expires</th><th>Decision</th></tr>
      </thead>
      <tbody></tbody>
    </table>
    <p id="empty" hidden>No pending approvals.</p>
  </section>
</main>
<script src="/approvals/app.js"></script>
</body>
</html>
`;

export const APPROVAL_PAGE_CSS = `body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1b1b1b; }
header { display: flex; gap: 1rem; align-items: baseline; }
h1 { font-size: 1.3rem; margin: 0 0 1rem; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid #ccc; padding: .4rem .5rem; vertical-align: top; text-align: left; }
pre { margin: 0; white-space: pre-wrap; word-break: break-all; max-width: 40rem; }
code { font-size: 12px; word-break: break-all; }
.risk-high { color: #a00; font-weight: bold; }
.risk-medium { color: #a60; }
.warning { color: #a00; }
.hint { color: #555; }
.toolbar { display: flex; gap: .5rem; align-items: center; }
input#credential { width: 32rem; max-width: 100%; }
`;

export const APPROVAL_PAGE_JS = `"use strict";
(function () {
  var KEY = "toolgate.approver.credential";
  var $ = function (id) { return document.getElementById(id); };
  var credential = sessionStorage.getItem(KEY);

  function api(method, path, body) {
    var init = { method: method, headers: { authorization: "Bearer " + credential } };
    if (body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (response) {
      return response.json().then(function (json) {
        if (!response.ok) {
          var error = new Error(json && json.error ? json.error.code + ": " + json.error.message : "HTTP " + response.status);
          error.status = response.status;
          throw error;
        }
        return json;
      });
    });
  }

  function status(text) { $("status").textContent = text; }

  function cell(row, content, className) {
    var td = document.createElement("td");
    if (typeof content === "string") td.textContent = content; else td.appendChild(content);
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function argumentsBlock(approval) {
    var box = document.createElement("div");
    var pre = document.createElement("pre");
    pre.textContent = JSON.stringify(approval.arguments, null, 2);
    box.appendChild(pre);
    approval.warnings.forEach(function (w) {
      var p = document.createElement("p");
      p.className = "warning";
      p.textContent = "⚠ " + w;
      box.appendChild(p);
    });
    approval.reasons.forEach(function (r) {
      var p = document.createElement("p");
      p.className = "hint";
      p.textContent = r;
      box.appendChild(p);
    });
    return box;
  }

  function decide(approval, action, reasonInput, buttons) {
    buttons.forEach(function (b) { b.disabled = true; });
    var body = { plan_hash: approval.plan_hash };
    if (reasonInput.value) body.reason = reasonInput.value;
    api("POST", "/v1/approvals/" + encodeURIComponent(approval.approval_id) + "/" + action, body)
      .then(function (answer) {
        status((action === "approve" ? "Approved " : "Denied ") + answer.approval.tool.name + " (" + answer.approval.approval_id + ")");
        load();
      })
      .catch(function (error) {
        status(error.message);
        buttons.forEach(function (b) { b.disabled = false; });
      });
  }

  function render(approvals) {
    var tbody = document.querySelector("#approvals tbody");
    tbody.replaceChildren();
    $("empty").hidden = approvals.length > 0;
    approvals.forEach(function (a) {
      var row = document.createElement("tr");
      row.setAttribute("data-approval-id", a.approval_id);
      row.setAttribute("data-call-id", a.call_id);
      cell(row, a.tool.name + "@" + a.tool.version);
      cell(row, a.requester.tenant + "/" + a.requester.subject);
      cell(row, a.risk + (a.taint.tainted ? " (tainted run: " + a.taint.sources.join(", ") + ")" : ""), "risk-" + a.risk);
      cell(row, argumentsBlock(a));
      var hash = document.createElement("code");
      hash.textContent = a.plan_hash;
      cell(row, hash);
      var expires = document.createElement("time");
      expires.dateTime = a.expires_at;
      expires.textContent = a.expires_at;
      cell(row, expires);
      var actions = document.createElement("div");
      var reason = document.createElement("input");
      reason.placeholder = "note (optional)";
      reason.setAttribute("aria-label", "note for " + a.approval_id);
      var approve = document.createElement("button");
      approve.type = "button";
      approve.textContent = "Approve";
      var deny = document.createElement("button");
      deny.type = "button";
      deny.textContent = "Deny";
      approve.addEventListener("click", function () { decide(a, "approve", reason, [approve, deny]); });
      deny.addEventListener("click", function () { decide(a, "deny", reason, [approve, deny]); });
      actions.append(reason, approve, deny);
      cell(row, actions);
      tbody.appendChild(row);
    });
  }

  function load() {
    return api("GET", "/v1/approvals").then(function (json) { render(json.approvals); }).catch(function (error) {
      if (error.status === 401) signOut("That credential was not accepted.");
      else status(error.message);
    });
  }

  function signOut(message) {
    credential = null;
    sessionStorage.removeItem(KEY);
    $("queue").hidden = true;
    $("signin").hidden = false;
    $("who").textContent = message || "";
  }

  function signedIn() {
    api("GET", "/v1/me").then(function (me) {
      $("who").textContent = "signed in as " + me.principal.tenant + "/" + me.principal.subject;
      $("signin").hidden = true;
      $("queue").hidden = false;
      return load();
    }).catch(function () { signOut("That credential was not accepted."); });
  }

  $("signin-form").addEventListener("submit", function (event) {
    event.preventDefault();
    credential = $("credential").value.trim();
    $("credential").value = "";
    sessionStorage.setItem(KEY, credential);
    signedIn();
  });
  $("refresh").addEventListener("click", function () { load(); });
  $("signout").addEventListener("click", function () { signOut(); });
  setInterval(function () { if (credential) load(); }, 5000);
  if (credential) signedIn();
})();
`;
