/**
 * The approval page: static HTML, CSS and a small script, served under a strict Content-Security-Policy (no
 * inline script or style, no other origin). The approver types an API key or JWT; it stays in this tab's session
 * storage and travels only as an `Authorization` header to the policy API — no cookie, so no cross-site request
 * can act with it. Everything shown comes from the API and is written with `textContent`, never as HTML: the
 * arguments are the model's and may contain markup. Sensitive arguments arrive already redacted by the desk.
 */
import { PAGE_DOM_HELPERS } from "@toolgate/service-runtime";

export const APPROVAL_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Toolgate — approvals</title>
<link rel="stylesheet" href="/approvals/app.css">
</head>
<body>
<header class="top">
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
    <p id="linked" class="linked" data-testid="linked" hidden><span id="linked-text"></span> <a id="all" href="/approvals">All pending approvals</a></p>
    <div id="approvals"></div>
    <p id="empty" hidden>No pending approvals.</p>
  </section>
</main>
<script src="/approvals/app.js"></script>
</body>
</html>
`;

export const APPROVAL_PAGE_CSS = `*, *::before, *::after { box-sizing: border-box; }
[hidden] { display: none !important; }
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1b1b1b; background: #f4f5f7; }
.top { display: flex; flex-wrap: wrap; gap: .25rem 1rem; align-items: baseline; padding: .9rem 1.5rem; background: #fff; border-bottom: 1px solid #d8dbe0; }
h1 { font-size: 1.3rem; margin: 0; }
main { padding: 1rem 1.5rem; max-width: 96rem; }
button, input { font: inherit; min-height: 2.25rem; }
button { padding: .3rem .9rem; border: 1px solid #8a8f98; border-radius: 4px; background: #fff; cursor: pointer; }
button:disabled { opacity: .5; cursor: not-allowed; }
button.approve { border-color: #1d6b35; }
button.confirm-approve { background: #1d6b35; border-color: #1d6b35; color: #fff; font-weight: 600; }
button.deny { border-color: #a00; color: #a00; }
input { padding: .3rem .5rem; border: 1px solid #8a8f98; border-radius: 4px; }
input#credential { width: 32rem; max-width: 100%; }
#signin-form { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }
.toolbar { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }
.approval { display: grid; grid-template-columns: minmax(0, 26rem) minmax(0, 1fr); grid-template-areas: "head head" "facts args" "decision decision";
  gap: .75rem 1.5rem; margin: 0 0 1rem; padding: 1rem; background: #fff; border: 1px solid #d8dbe0; border-radius: 6px; }
.approval.expired { opacity: .65; }
.approval > header { grid-area: head; display: flex; flex-wrap: wrap; gap: .25rem .75rem; align-items: baseline; }
.approval h2 { font-size: 1.1rem; margin: 0; overflow-wrap: anywhere; }
.tag { font-size: .85rem; padding: 0 .4rem; border-radius: 3px; background: #eceef1; }
.risk-high { color: #a00; font-weight: bold; }
.risk-medium { color: #8a4b00; }
.facts { grid-area: facts; margin: 0; display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .2rem .75rem; align-content: start; }
.facts dt { color: #555; }
.facts dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
code { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.countdown { display: block; color: #555; }
.countdown.soon, .countdown.over { color: #a00; font-weight: 600; }
.args { grid-area: args; min-width: 0; }
.args h3 { font-size: .95rem; margin: 0 0 .3rem; }
pre.arguments { margin: 0; padding: .5rem .75rem; max-height: 28rem; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere; tab-size: 2;
  font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f6f7f9; border: 1px solid #d8dbe0; border-radius: 4px; }
.j-key { color: #0b4f8a; }
.j-str { color: #1b1b1b; }
.j-lit { color: #7a3e9d; }
.masked { padding: 0 .3rem; border-radius: 3px; background: #1b1b1b; color: #fff; font-style: italic; }
.warning { color: #a00; margin: .3rem 0 0; }
.hint { color: #555; margin: .3rem 0 0; }
.linked { background: #fff8e1; border: 1px solid #e0c068; border-radius: 4px; padding: .5rem .75rem; overflow-wrap: anywhere; }
.decision { grid-area: decision; display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }
.decision > input { flex: 1 1 16rem; min-width: 0; }
.confirm { flex: 1 1 100%; display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; padding: .6rem .75rem; border: 2px solid #1d6b35; border-radius: 4px; background: #eef7f0; }
.confirm p { flex: 1 1 100%; margin: 0; overflow-wrap: anywhere; }
@media (max-width: 48rem) {
  .top { padding: .75rem; }
  main { padding: .75rem; }
  .approval { grid-template-columns: minmax(0, 1fr); grid-template-areas: "head" "facts" "args" "decision"; padding: .75rem; }
  button { min-height: 2.75rem; }
  code { font-size: 12px; }
  .decision > button { flex: 1 1 8rem; }
  .confirm > button { flex: 1 1 auto; white-space: nowrap; }
}
`;

export const APPROVAL_PAGE_JS = `"use strict";
(function () {
  var KEY = "toolgate.approver.credential";
  // The desk's placeholder for a value the tool's contract marks sensitive (REDACTED in @toolgate/registry).
  var MASKED_TITLE = "The tool's contract marks this field sensitive; its value is not shown to approvers.";
  var REDACTED = "[REDACTED]";
  var $ = function (id) { return document.getElementById(id); };
  var credential = sessionStorage.getItem(KEY);
  // Server time minus this browser's, from the API's Date header: a countdown must not trust a wrong local clock.
  var skewMs = 0;
  // The cards on screen by approval id, kept across refreshes so a note being typed or an open confirmation survives.
  var cards = new Map();
  // A link to one request (\`?approval_id=…&call_id=…\`, what the MCP front door gives a client whose call waits):
  // the page shows that request alone, or why it cannot be decided any more.
  var query = new URLSearchParams(location.search);
  var linked = query.get("approval_id");
  var linkedCall = query.get("call_id");
  var me = null;
  var WHY = {
    approved: "it was approved",
    denied: "it was denied",
    expired: "nobody decided it in time",
    revoked: "the policy in force no longer allows the call",
    withdrawn: "it was withdrawn: its call was cancelled or its run stopped, and the call will not run",
  };

  function api(method, path, body) {
    var init = { method: method, headers: { authorization: "Bearer " + credential } };
    if (body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (response) {
      var date = Date.parse(response.headers.get("date") || "");
      if (!isNaN(date)) skewMs = Math.abs(date - Date.now()) > 2000 ? date - Date.now() : 0;
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

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  /** "2025-03-01 14:05:09 UTC+01:00" in this browser's time zone: unambiguous whatever the locale. */
  function localTime(iso) {
    var d = new Date(iso);
    var offset = -d.getTimezoneOffset();
    var zone = "UTC" + (offset < 0 ? "-" : "+") + pad(Math.floor(Math.abs(offset) / 60)) + ":" + pad(Math.abs(offset) % 60);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + " " + zone;
  }

  function timeElement(iso) {
    var t = el("time", "", localTime(iso));
    t.dateTime = iso;
    t.title = iso;
    return t;
  }

  function remaining(ms) {
    var s = Math.floor(ms / 1000);
    if (s >= 3600) return Math.floor(s / 3600) + " h " + pad(Math.floor((s % 3600) / 60)) + " min";
    if (s >= 60) return Math.floor(s / 60) + " min " + pad(s % 60) + " s";
    return s + " s";
  }

${PAGE_DOM_HELPERS}
  function code(text) { return el("code", "", text); }

  function decide(card, action) {
    var a = card.approval;
    card.busy = true;
    card.sync();
    var body = { plan_hash: a.plan_hash };
    if (card.note.value) body.reason = card.note.value;
    api("POST", "/v1/approvals/" + encodeURIComponent(a.approval_id) + "/" + action, body)
      .then(function (answer) {
        status((action === "approve" ? "Approved " : "Denied ") + answer.approval.tool.name + " (" + answer.approval.approval_id + ")");
        load();
      })
      .catch(function (error) {
        status(error.message);
        card.busy = false;
        card.sync();
      });
  }

  function buildCard(a) {
    var node = el("article", "approval");
    node.setAttribute("data-approval-id", a.approval_id);
    node.setAttribute("data-call-id", a.call_id);
    node.setAttribute("aria-label", a.tool.name + " requested by " + a.requester.tenant + "/" + a.requester.subject);

    var head = el("header");
    head.appendChild(el("h2", "", a.tool.name + "@" + a.tool.version));
    head.appendChild(el("span", "tag risk-" + a.risk, a.risk + " risk"));
    head.appendChild(el("span", "tag", "side effect: " + a.side_effect));
    if (a.taint.tainted) head.appendChild(el("span", "tag warning", "tainted run: " + a.taint.sources.join(", ")));
    node.appendChild(head);

    var facts = el("dl", "facts");
    fact(facts, "Requested by", a.requester.tenant + "/" + a.requester.subject, "requester");
    fact(facts, "Requested", timeElement(a.requested_at), "requested-at");
    var expires = fact(facts, "Expires", timeElement(a.expires_at), "expires-at");
    var countdown = el("span", "countdown");
    countdown.setAttribute("data-field", "countdown");
    expires.appendChild(countdown);
    fact(facts, "Call", code(a.call_id), "call-id");
    fact(facts, "Run", code(a.run_id), "run-id");
    fact(facts, "Approval", code(a.approval_id), "approval-id");
    fact(facts, "Plan hash", code(a.plan_hash), "plan-hash");
    node.appendChild(facts);
    node.appendChild(argumentsBlock(a));

    var decision = el("div", "decision");
    var note = el("input");
    note.placeholder = "note (optional)";
    note.maxLength = 400;
    note.setAttribute("aria-label", "note for " + a.approval_id);
    var approve = el("button", "approve", "Approve");
    approve.type = "button";
    approve.setAttribute("aria-expanded", "false");
    var deny = el("button", "deny", "Deny");
    deny.type = "button";
    // Approve only opens this step; the decision is sent from "Confirm approval", placed apart from Approve so a
    // double click cannot go through both.
    var confirm = el("div", "confirm");
    confirm.setAttribute("role", "group");
    confirm.hidden = true;
    var question = el("p");
    question.tabIndex = -1;
    question.id = "confirm-" + a.approval_id;
    question.appendChild(el("strong", "", "Approve this call? "));
    question.appendChild(document.createTextNode(
      a.tool.name + "@" + a.tool.version + " will run for " + a.requester.tenant + "/" + a.requester.subject +
      " with exactly the arguments shown (plan hash " + a.plan_hash.slice(0, 19) + "…)." +
      (a.warnings.length > 0 ? " ⚠ " + a.warnings.length + " warning(s) about the arguments above." : "")));
    confirm.setAttribute("aria-labelledby", question.id);
    var yes = el("button", "confirm-approve", "Confirm approval");
    yes.type = "button";
    var no = el("button", "", "Cancel");
    no.type = "button";
    confirm.append(question, yes, no);
    decision.append(note, approve, deny, confirm);
    node.appendChild(decision);

    var card = { approval: a, node: node, note: note, busy: false, expired: false };
    card.sync = function () {
      approve.disabled = deny.disabled = yes.disabled = card.busy || card.expired;
      if (card.expired) confirm.hidden = true;
      approve.setAttribute("aria-expanded", String(!confirm.hidden));
    };
    card.tick = function () {
      var left = Date.parse(a.expires_at) - (Date.now() + skewMs);
      var expired = left <= 0;
      countdown.textContent = expired ? "expired: it can no longer be approved" : "in " + remaining(left);
      countdown.className = "countdown" + (expired ? " over" : left < 60000 ? " soon" : "");
      if (expired !== card.expired) {
        card.expired = expired;
        node.classList.toggle("expired", expired);
        card.sync();
      }
    };
    approve.addEventListener("click", function () {
      confirm.hidden = !confirm.hidden;
      card.sync();
      if (!confirm.hidden) question.focus();
    });
    no.addEventListener("click", function () { confirm.hidden = true; card.sync(); approve.focus(); });
    yes.addEventListener("click", function () { decide(card, "approve"); });
    deny.addEventListener("click", function () { decide(card, "deny"); });
    card.tick();
    card.sync();
    return card;
  }

  function render(approvals) {
    var list = $("approvals");
    var seen = new Set();
    approvals.forEach(function (a, i) {
      seen.add(a.approval_id);
      var card = cards.get(a.approval_id);
      // A request's arguments and plan hash never change under its id, so a card on screen stays as it is.
      if (!card) { card = buildCard(a); cards.set(a.approval_id, card); }
      if (list.children[i] !== card.node) list.insertBefore(card.node, list.children[i] || null);
    });
    cards.forEach(function (card, id) {
      if (!seen.has(id)) { card.node.remove(); cards.delete(id); }
    });
    $("empty").hidden = approvals.length > 0 || linked !== null;
  }

  function notice(text) {
    $("linked").hidden = linked === null;
    $("linked-text").textContent = text;
  }

  function loadLinked() {
    return api("GET", "/v1/approvals/" + encodeURIComponent(linked)).then(function (json) {
      var a = json.approval;
      if (linkedCall !== null && a.call_id !== linkedCall) {
        render([]);
        return notice("This link names call " + linkedCall + ", but approval " + a.approval_id + " is of call " + a.call_id + ": nothing to decide here.");
      }
      if (a.state !== "pending") {
        render([]);
        return notice("Approval " + a.approval_id + " of " + a.tool.name + " (call " + a.call_id + ") can no longer be decided: " + (WHY[a.state] || a.state) + ".");
      }
      if (me && a.requester.tenant === me.tenant && a.requester.subject === me.subject) {
        render([]);
        return notice("You made call " + a.call_id + ": another approver must decide approval " + a.approval_id + ".");
      }
      notice("The approval this link names:");
      render([a]);
    }).catch(function (error) {
      if (error.status === 401) return signOut("That credential was not accepted.");
      if (error.status === 404) {
        render([]);
        return notice("There is no approval " + linked + " that you may decide.");
      }
      status(error.message);
    });
  }

  function load() {
    if (linked !== null) return loadLinked();
    return api("GET", "/v1/approvals").then(function (json) { render(json.approvals); }).catch(function (error) {
      if (error.status === 401) signOut("That credential was not accepted.");
      else status(error.message);
    });
  }

  function signOut(message) {
    credential = null;
    me = null;
    sessionStorage.removeItem(KEY);
    render([]);
    $("queue").hidden = true;
    $("signin").hidden = false;
    $("who").textContent = message || "";
  }

  function signedIn() {
    api("GET", "/v1/me").then(function (answer) {
      me = answer.principal;
      $("who").textContent = "signed in as " + me.tenant + "/" + me.subject;
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
  $("all").href = location.pathname;
  $("refresh").addEventListener("click", function () { load(); });
  $("signout").addEventListener("click", function () { signOut(); });
  setInterval(function () { if (credential) load(); }, 5000);
  setInterval(function () { cards.forEach(function (card) { card.tick(); }); }, 1000);
  if (credential) signedIn();
})();
`;
