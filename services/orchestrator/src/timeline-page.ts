/**
 * The run timeline page: static HTML, CSS and a small script, served under a strict Content-Security-Policy (no
 * inline script or style, no other origin). The reader types an API key or JWT of the orchestrator's API; it
 * stays in this tab's session storage and travels only as an `Authorization` header to
 * `GET /v1/runs/{run_id}/timeline` — no cookie, so no cross-site request can act with it. Everything shown comes
 * from that endpoint and is written with `textContent`, never as HTML: tool names, arguments and messages may
 * come from the model. Sensitive arguments arrive already redacted; the page polls while the run is live.
 */
import { PAGE_DOM_HELPERS } from "@toolgate/service-runtime";

export const TIMELINE_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Toolgate — run timeline</title>
<link rel="stylesheet" href="/timeline/app.css">
</head>
<body>
<header class="top">
  <h1>Run timeline</h1>
  <span id="who" data-testid="who"></span>
</header>
<main>
  <section id="signin">
    <form id="signin-form">
      <label for="credential">API key or JWT</label>
      <input id="credential" name="credential" type="password" autocomplete="off" required>
      <button type="submit">Sign in</button>
    </form>
    <p class="hint">The credential stays in this browser tab and is sent only to this service, as an Authorization header.</p>
  </section>
  <section id="view" hidden>
    <form id="run-form" class="toolbar">
      <label for="run-id">Run</label>
      <input id="run-id" name="run_id" autocomplete="off" spellcheck="false" placeholder="run_…" required>
      <button type="submit">Show</button>
      <button id="signout" type="button">Sign out</button>
      <span id="status" role="status" data-testid="status"></span>
    </form>
    <div id="run" hidden>
      <dl class="facts" id="run-facts"></dl>
      <p class="legend" aria-hidden="true">
        <span><span class="key seg-policy"></span>policy</span>
        <span><span class="key seg-approval"></span>approval wait</span>
        <span><span class="key seg-queue"></span>queued</span>
        <span><span class="key seg-attempt"></span>attempt</span>
        <span><span class="key seg-attempt failed"></span>failed attempt</span>
        <span><span class="key seg-attach"></span>attaching the outcome</span>
      </p>
      <div class="lane axis-lane" aria-hidden="true"><div></div><div id="axis" class="axis"></div></div>
      <div id="lanes"></div>
      <details id="run-events-box">
        <summary>Run events</summary>
        <div class="scroll"><table id="run-events" class="events"></table></div>
      </details>
    </div>
  </section>
</main>
<script src="/timeline/app.js"></script>
</body>
</html>
`;

export const TIMELINE_PAGE_CSS = `*, *::before, *::after { box-sizing: border-box; }
[hidden] { display: none !important; }
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1b1b1b; background: #f4f5f7; }
.top { display: flex; flex-wrap: wrap; gap: .25rem 1rem; align-items: baseline; padding: .9rem 1.5rem; background: #fff; border-bottom: 1px solid #d8dbe0; }
h1 { font-size: 1.3rem; margin: 0; }
main { padding: 1rem 1.5rem; max-width: 110rem; }
button, input { font: inherit; min-height: 2.25rem; }
button { padding: .3rem .9rem; border: 1px solid #8a8f98; border-radius: 4px; background: #fff; cursor: pointer; }
input { padding: .3rem .5rem; border: 1px solid #8a8f98; border-radius: 4px; }
input#credential { width: 32rem; max-width: 100%; }
input#run-id { width: 22rem; max-width: 100%; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
#signin-form, .toolbar { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }
.hint { color: #555; margin: .3rem 0 0; }
code { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.facts { margin: 1rem 0; display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .2rem .75rem; }
.facts dt { color: #555; }
.facts dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
.live { color: #1d6b35; font-weight: 600; }
.legend { display: flex; flex-wrap: wrap; gap: .2rem 1rem; align-items: center; color: #555; font-size: .85rem; margin: 0 0 .5rem; }
.legend > span { white-space: nowrap; }
.legend .key { display: inline-block; width: 1.4rem; height: .7rem; border-radius: 2px; margin-right: .3rem; vertical-align: -.05rem; }
.lane { display: grid; grid-template-columns: minmax(0, 24rem) minmax(0, 1fr); gap: .25rem 1rem; align-items: start; }
/* The axis lines up with the cards' tracks: the same columns inside the same padding and border. */
.axis-lane { padding: 0 calc(.75rem + 1px); }
.axis { position: relative; height: 1.6rem; border-bottom: 1px solid #8a8f98; }
.tick { position: absolute; bottom: 0; height: .45rem; border-left: 1px solid #8a8f98; }
.tick span { position: absolute; bottom: .5rem; left: 0; transform: translateX(-50%); font-size: .75rem; color: #555; white-space: nowrap; }
.tick.last span { transform: translateX(-100%); }
.tick.first span { transform: none; }
h2.turn { font-size: 1rem; margin: 1rem 0 .3rem; padding-top: .4rem; border-top: 1px solid #d8dbe0; }
h2.turn .hint { font-weight: normal; font-size: .9rem; margin-left: .5rem; }
article.call { background: #fff; border: 1px solid #d8dbe0; border-radius: 6px; padding: .55rem .75rem; margin: 0 0 .5rem; }
.call .info { min-width: 0; }
.call h3 { font-size: 1rem; margin: 0; overflow-wrap: anywhere; }
.call .line { display: flex; flex-wrap: wrap; gap: .1rem .6rem; align-items: baseline; font-size: .88rem; min-width: 0; }
.badge { font-size: .82rem; padding: 0 .4rem; border-radius: 3px; background: #eceef1; white-space: nowrap; }
.badge.ok { background: #e3f3e7; color: #1d6b35; }
.badge.error { background: #fbe6e6; color: #a00; }
.badge.waiting { background: #fff3d6; color: #7a4b00; }
.badge.running { background: #e3edfb; color: #0b4f8a; }
.track { position: relative; height: 2.1rem; margin-top: .2rem; background: repeating-linear-gradient(90deg, #f6f7f9, #f6f7f9 9.99%, #eceef1 10%); border-radius: 3px; }
.seg { position: absolute; top: .55rem; height: 1rem; min-width: 2px; border-radius: 2px; }
.seg-policy, .key.seg-policy { background: #7a3e9d; }
.seg-approval, .key.seg-approval { background: repeating-linear-gradient(45deg, #e0a800, #e0a800 4px, #f2cf5b 4px, #f2cf5b 8px); }
.seg-queue, .key.seg-queue { background: #b8bec8; }
.seg-attempt, .key.seg-attempt { background: #0b6bcb; }
.seg-attempt.failed, .key.seg-attempt.failed { background: #c0392b; }
.seg-attach, .key.seg-attach { background: #1d6b35; }
.seg.open { box-shadow: inset -3px 0 0 rgba(255,255,255,.7); }
.mark { position: absolute; top: .25rem; width: 0; height: 1.6rem; border-left: 2px solid #1b1b1b; opacity: .55; }
.mark.terminal { opacity: 1; }
details.more { margin-top: .35rem; }
details.more summary, #run-events-box summary { cursor: pointer; color: #0b4f8a; font-size: .9rem; }
.scroll { overflow-x: auto; max-width: 100%; }
table.events { border-collapse: collapse; font-size: .85rem; margin: .3rem 0; }
table.events th, table.events td { text-align: left; padding: .15rem .6rem .15rem 0; vertical-align: top; }
table.events td.detail { overflow-wrap: anywhere; min-width: 10rem; }
table.events td.when { white-space: nowrap; }
pre.arguments { margin: .3rem 0 0; padding: .5rem .75rem; max-height: 20rem; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere;
  font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f6f7f9; border: 1px solid #d8dbe0; border-radius: 4px; }
.j-key { color: #0b4f8a; }
.j-lit { color: #7a3e9d; }
.masked { padding: 0 .3rem; border-radius: 3px; background: #1b1b1b; color: #fff; font-style: italic; }
.error-message { color: #a00; font-size: .88rem; margin: .15rem 0 0; overflow-wrap: anywhere; }
.final { white-space: pre-wrap; overflow-wrap: anywhere; }
@media (max-width: 48rem) {
  .top { padding: .75rem; }
  main { padding: .75rem; }
  .lane { grid-template-columns: minmax(0, 1fr); }
  .axis-lane > div:first-child { display: none; }
  button { min-height: 2.75rem; }
}
`;

export const TIMELINE_PAGE_JS = `"use strict";
(function () {
  var KEY = "toolgate.api.credential";
  // The placeholder of a value the tool's contract marks sensitive (REDACTED in @toolgate/registry).
  var MASKED_TITLE = "The tool's contract marks this field sensitive; its value is not shown.";
  var REDACTED = "[REDACTED]";
  var STATUS_TEXT = { proposed: "proposed", awaiting_approval: "awaiting approval", authorized: "authorized", running: "running",
    completed: "completed", rejected: "rejected", denied: "denied", outcome_unknown: "outcome unknown" };
  var TERMINAL = { rejected: true, denied: true, completed: true, outcome_unknown: true };
  var $ = function (id) { return document.getElementById(id); };
  var credential = sessionStorage.getItem(KEY);
  var runId = new URLSearchParams(location.search).get("run_id") || "";
  // Server time minus this browser's: the live edge of the axis is the server's now.
  var skewMs = 0;
  var timer = null;
  var generation = 0;
  // Which calls' details are open, kept across refreshes.
  var open = new Set();

  function api(path) {
    return fetch(path, { headers: { authorization: "Bearer " + credential } }).then(function (response) {
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

  function pad(n, width) { var s = String(n); while (s.length < (width || 2)) s = "0" + s; return s; }

  /** "2025-03-01 14:05:09.123 UTC+01:00" in this browser's time zone. */
  function localTime(iso) {
    var d = new Date(iso);
    var offset = -d.getTimezoneOffset();
    var zone = "UTC" + (offset < 0 ? "-" : "+") + pad(Math.floor(Math.abs(offset) / 60)) + ":" + pad(Math.abs(offset) % 60);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" +
      pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + "." + pad(d.getMilliseconds(), 3) + " " + zone;
  }

  function timeElement(iso) {
    var t = el("time", "", localTime(iso));
    t.dateTime = iso;
    t.title = iso;
    return t;
  }

  function duration(ms) {
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
    var s = Math.round(ms / 1000);
    if (s < 3600) return Math.floor(s / 60) + " min " + pad(s % 60) + " s";
    return Math.floor(s / 3600) + " h " + pad(Math.floor((s % 3600) / 60)) + " min";
  }

${PAGE_DOM_HELPERS}
  function auditLink(url, path, label) {
    // Only an http(s) URL from the server's configuration becomes a link; otherwise the path is shown.
    if (url && /^https?:/.test(url)) {
      var a = el("a", "", label);
      a.href = url;
      a.rel = "noreferrer";
      a.setAttribute("data-field", "audit");
      return a;
    }
    var c = el("code", "", "audit " + path);
    c.setAttribute("data-field", "audit");
    return c;
  }

  /** The axis: from the run's start to its end (or the server's now while it is live). */
  function scale(t) {
    var start = Date.parse(t.started_at);
    var end = Date.parse(t.ended_at || t.started_at);
    var consider = function (iso) { if (iso) end = Math.max(end, Date.parse(iso)); };
    t.run_events.forEach(function (e) { consider(e.time); });
    t.calls.forEach(function (c) {
      consider(c.attached_at);
      c.events.forEach(function (e) { consider(e.time); });
    });
    var now = Date.now() + skewMs;
    if (t.live) end = Math.max(end, now);
    var span = Math.max(end - start, 1);
    return {
      start: start, end: end, now: now, live: t.live,
      at: function (iso) { return iso ? Date.parse(iso) : (t.live ? now : end); },
      pct: function (ms) { return Math.min(100, Math.max(0, ((ms - start) / span) * 100)); },
    };
  }

  function drawAxis(s) {
    var axis = $("axis");
    axis.textContent = "";
    var span = s.end - s.start;
    var steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 1800000, 3600000];
    var step = steps[steps.length - 1];
    for (var i = 0; i < steps.length; i++) if (span / steps[i] <= 8) { step = steps[i]; break; }
    // Regular ticks, leaving room for the label of the end (the run's length, or now while it is live).
    for (var ms = 0; ms <= span - step * 0.8 || ms === 0; ms += step) {
      var tick = el("div", "tick" + (ms === 0 ? " first" : ""));
      tick.style.left = ((ms / Math.max(span, 1)) * 100) + "%";
      tick.appendChild(el("span", "", "+" + duration(ms)));
      axis.appendChild(tick);
    }
    var last = el("div", "tick last");
    last.style.left = "100%";
    last.appendChild(el("span", "", (s.live ? "now +" : "+") + duration(span)));
    axis.appendChild(last);
  }

  function segment(track, s, cls, from, to, label) {
    if (!from) return;
    var a = s.pct(Date.parse(from));
    var b = s.pct(s.at(to));
    var seg = el("div", "seg " + cls + (to ? "" : " open"));
    seg.style.left = a + "%";
    seg.style.width = Math.max(b - a, 0.2) + "%";
    seg.title = label + ": " + duration(Math.max(s.at(to) - Date.parse(from), 0)) + (to ? "" : " so far");
    seg.setAttribute("data-phase", cls.split(" ")[0].replace("seg-", ""));
    track.appendChild(seg);
  }

  function drawTrack(c, s) {
    var track = el("div", "track");
    track.setAttribute("data-field", "track");
    var firstStart = c.attempts.length > 0 ? c.attempts[0].started_at : undefined;
    var decided = c.approval ? c.approval.requested_at : (c.authorized_at || (TERMINAL[c.status] && !firstStart ? c.ended_at : undefined));
    segment(track, s, "seg-policy", c.proposed_at, decided, "policy");
    if (c.approval) segment(track, s, "seg-approval", c.approval.requested_at, c.approval.granted_at || c.authorized_at || c.ended_at, "approval wait");
    if (c.authorized_at) segment(track, s, "seg-queue", c.authorized_at, firstStart || c.ended_at, "queued");
    c.attempts.forEach(function (a) {
      var failed = a.outcome && a.outcome !== "ok";
      segment(track, s, "seg-attempt" + (failed ? " failed" : ""), a.started_at, a.ended_at || (TERMINAL[c.status] ? c.ended_at : undefined),
        "attempt " + a.attempt + (a.outcome ? " (" + a.outcome + ")" : ""));
    });
    if (c.ended_at) segment(track, s, "seg-attach", c.ended_at, c.attached_at, "attaching the outcome");
    c.events.forEach(function (e) {
      var mark = el("div", "mark" + (TERMINAL[e.type] ? " terminal" : ""));
      mark.style.left = s.pct(Date.parse(e.time)) + "%";
      mark.title = e.type + (e.attempt > 1 ? " #" + e.attempt : "") + " at +" + duration(Date.parse(e.time) - s.start) + (e.detail ? ": " + e.detail : "");
      mark.setAttribute("data-event-type", e.type);
      track.appendChild(mark);
    });
    return track;
  }

  function eventsTable(table, events, s) {
    table.textContent = "";
    var head = el("tr");
    ["event", "attempt", "time", "since start", "by", "detail"].forEach(function (h) { head.appendChild(el("th", "", h)); });
    table.appendChild(head);
    events.forEach(function (e) {
      var row = el("tr");
      row.setAttribute("data-event-type", e.type);
      row.setAttribute("data-attempt", String(e.attempt));
      row.setAttribute("data-seq", String(e.seq));
      row.setAttribute("data-time", e.time);
      row.appendChild(el("td", "", e.type));
      row.appendChild(el("td", "", String(e.attempt)));
      var when = el("td", "when");
      when.appendChild(timeElement(e.time));
      row.appendChild(when);
      row.appendChild(el("td", "", "+" + duration(Math.max(Date.parse(e.time) - s.start, 0))));
      row.appendChild(el("td", "", e.source));
      row.appendChild(el("td", "detail", e.detail || ""));
      table.appendChild(row);
    });
  }

  function badgeClass(c) {
    if (TERMINAL[c.status]) return c.ok ? "ok" : "error";
    if (c.status === "awaiting_approval") return "waiting";
    return "running";
  }

  function callCard(c, s) {
    var node = el("article", "call lane");
    node.setAttribute("data-call-id", c.call_id);
    node.setAttribute("data-status", c.status);
    node.setAttribute("aria-label", c.tool + " " + (STATUS_TEXT[c.status] || c.status));
    var info = el("div", "info");
    var title = el("h3", "", c.tool);
    title.setAttribute("data-field", "tool");
    info.appendChild(title);
    var line = el("div", "line");
    var badge = el("span", "badge " + badgeClass(c), (STATUS_TEXT[c.status] || c.status) + (TERMINAL[c.status] && !c.attached ? ", attaching" : ""));
    badge.setAttribute("data-field", "status");
    line.appendChild(badge);
    if (c.error_code) {
      var code = el("code", "", c.error_code);
      code.setAttribute("data-field", "error-code");
      line.appendChild(code);
    }
    var took = c.duration_ms !== undefined ? duration(c.duration_ms) : duration(Math.max(s.now - Date.parse(c.proposed_at), 0)) + " so far";
    var d = el("span", "", took);
    d.setAttribute("data-field", "duration");
    d.title = "from its proposal to its attached outcome" + (c.execution_ms !== undefined ? "; the tool ran " + duration(c.execution_ms) : "");
    line.appendChild(d);
    if (c.attempts.length > 1) line.appendChild(el("span", "", c.attempts.length + " attempts"));
    info.appendChild(line);
    var ids = el("div", "line");
    var id = el("code", "", c.call_id);
    id.setAttribute("data-field", "call-id");
    ids.appendChild(id);
    ids.appendChild(auditLink(c.audit_url, c.audit_path, "audit trail"));
    info.appendChild(ids);
    if (c.error_message) info.appendChild(el("p", "error-message", c.error_message));
    node.appendChild(info);

    var right = el("div", "right");
    right.appendChild(drawTrack(c, s));
    var more = el("details", "more");
    more.open = open.has(c.call_id);
    more.addEventListener("toggle", function () { if (more.open) open.add(c.call_id); else open.delete(c.call_id); });
    more.appendChild(el("summary", "", c.events.length + " events, arguments"));
    var scroll = el("div", "scroll");
    var table = el("table", "events");
    table.setAttribute("data-field", "events");
    eventsTable(table, c.events, s);
    scroll.appendChild(table);
    more.appendChild(scroll);
    if (c.arguments_hidden) more.appendChild(el("p", "hint", "Arguments not shown: their text is not JSON and the tool has sensitive fields."));
    else if (c.arguments !== undefined) {
      var pre = el("pre", "arguments");
      pre.setAttribute("data-testid", "arguments");
      var masked = [];
      appendJson(pre, c.arguments, "", "", masked);
      more.appendChild(pre);
      if (masked.length > 0) more.appendChild(el("p", "hint", "Hidden because the tool's contract marks them sensitive: " + masked.join(", ")));
    }
    right.appendChild(more);
    node.appendChild(right);
    return node;
  }

  function render(t) {
    var s = scale(t);
    var box = $("run");
    box.hidden = false;
    box.setAttribute("data-run-id", t.run_id);
    box.setAttribute("data-status", t.status);
    box.setAttribute("data-live", String(t.live));
    var facts = $("run-facts");
    facts.textContent = "";
    var rid = el("code", "", t.run_id);
    fact(facts, "Run", rid, "run-id");
    fact(facts, "Status", t.status + (t.stop_reason ? " (" + t.stop_reason + ")" : ""), "run-status");
    fact(facts, "Model", t.model, "model");
    fact(facts, "Started", timeElement(t.started_at), "started-at");
    if (t.ended_at) fact(facts, "Ended", timeElement(t.ended_at), "ended-at");
    // A host-driven run never ends: it spans from its first event to its latest.
    var elapsed = t.ended_at ? ["Took", Date.parse(t.ended_at)] : t.status === "external" ? ["Spans", s.end] : ["Running for", s.now];
    fact(facts, elapsed[0], duration(elapsed[1] - Date.parse(t.started_at)), "elapsed");
    fact(facts, "Calls", t.calls.length + (t.truncated ? " (the latest; the run has more)" : ""), "call-count");
    fact(facts, "Updates", t.live ? el("span", "live", "live: refreshed every second") : el("span", "", "the run has ended"), "updates");
    fact(facts, "Audit", auditLink(t.audit_url, t.audit_path, "the run's audit trail"), "run-audit");
    if (t.final_text) fact(facts, "Final answer", el("span", "final", t.final_text), "final-text");
    drawAxis(s);
    var lanes = $("lanes");
    lanes.textContent = "";
    var byId = new Map(t.calls.map(function (c) { return [c.call_id, c]; }));
    t.turns.forEach(function (turn) {
      // A host-driven run's calls come in submissions, not model turns.
      var h = el("h2", "turn", t.status === "external" ? "Submission" : "Turn " + turn.turn);
      h.setAttribute("data-turn", String(turn.turn));
      var first = byId.get(turn.call_ids[0]);
      var note = turn.responded_at ? "model answered " + (turn.outcome || "") + " at +" + duration(Date.parse(turn.responded_at) - s.start)
        : t.status === "external" && first ? "submitted at +" + duration(Math.max(Date.parse(first.proposed_at) - s.start, 0)) : "";
      note += (note ? " · " : "") + turn.call_ids.length + " call(s)";
      h.appendChild(el("span", "hint", note));
      lanes.appendChild(h);
      turn.call_ids.forEach(function (id) { var c = byId.get(id); if (c) lanes.appendChild(callCard(c, s)); });
    });
    eventsTable($("run-events"), t.run_events, s);
  }

  function schedule(t, mine) {
    clearTimeout(timer);
    var every = t.live ? 1000 : t.status === "external" ? 5000 : 0;
    if (every > 0) timer = setTimeout(function () { if (mine === generation) load(mine); }, every);
  }

  function load(mine) {
    return api("/v1/runs/" + encodeURIComponent(runId) + "/timeline").then(function (t) {
      if (mine !== generation) return;
      skewMs = Date.parse(t.server_time) - Date.now();
      render(t);
      status(t.live ? "Updated " + localTime(t.server_time) : "Run ended; not updating");
      schedule(t, mine);
    }).catch(function (error) {
      if (mine !== generation) return;
      if (error.status === 401) return signOut("That credential was not accepted.");
      status(error.status === 404 ? "No such run (or it is not yours)." : error.message);
      if (error.status === 404) $("run").hidden = true;
      // A failed refresh of a live run is tried again.
      else timer = setTimeout(function () { if (mine === generation) load(mine); }, 3000);
    });
  }

  function show(id) {
    runId = id;
    generation += 1;
    clearTimeout(timer);
    $("run-id").value = id;
    var url = new URL(location.href);
    url.searchParams.set("run_id", id);
    history.replaceState(null, "", url.pathname + url.search);
    if (id) load(generation);
  }

  function signOut(message) {
    credential = null;
    generation += 1;
    clearTimeout(timer);
    sessionStorage.removeItem(KEY);
    $("run").hidden = true;
    $("view").hidden = true;
    $("signin").hidden = false;
    $("who").textContent = message || "";
  }

  function signedIn() {
    $("signin").hidden = true;
    $("view").hidden = false;
    $("who").textContent = "signed in";
    show(runId);
  }

  $("signin-form").addEventListener("submit", function (event) {
    event.preventDefault();
    credential = $("credential").value.trim();
    $("credential").value = "";
    sessionStorage.setItem(KEY, credential);
    signedIn();
  });
  $("run-form").addEventListener("submit", function (event) {
    event.preventDefault();
    show($("run-id").value.trim());
  });
  $("signout").addEventListener("click", function () { signOut(); });
  if (credential) signedIn();
})();
`;
