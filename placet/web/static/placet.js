// placet web: countdowns and the WebAuthn calls (the only script; the CSP allows no other).
"use strict";

function b64uToBytes(s) {
  const pad = "=".repeat((4 - (s.length % 4)) % 4);
  const bin = atob((s + pad).replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

function bytesToB64u(buf) {
  const bytes = new Uint8Array(buf);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function say(text, bad) {
  const el = document.getElementById("status");
  if (el) {
    el.textContent = text;
    el.className = bad ? "refusal" : "notice";
  }
}

// The session credential: kept in this origin's localStorage (scheme, host and port:
// no other localhost port can read it, and the browser sends it nowhere by itself) and
// sent by this script only, as a header, to this origin only (docs/security.md).
const SESSION = "placet_session";

function session() {
  try { return localStorage.getItem(SESSION) || ""; } catch (e) { return ""; }
}

function remember(token) { localStorage.setItem(SESSION, token); }

function forget() { try { localStorage.removeItem(SESSION); } catch (e) { /* none kept */ } }

// fetch() on this origin with the session header; never with cookies.
function authed(url, init) {
  const headers = new Headers((init && init.headers) || {});
  const token = session();
  if (token) headers.set("X-Placet-Session", token);
  return fetch(url, { ...(init || {}), headers: headers, credentials: "omit" });
}

async function post(url, body) {
  const r = await authed(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
  let data = {};
  try { data = await r.json(); } catch (e) { data = { ok: false, message: "HTTP " + r.status }; }
  if (!r.ok || data.ok === false) {
    throw new Error((data.code ? data.code + ": " : "") + (data.message || ("HTTP " + r.status)));
  }
  return data;
}

// Show the page `url` answers (read with the session; `init` for a form's POST, whose
// redirect fetch follows with the header) in place of this one. Signed out (401): the
// session is forgotten and the sign-in page it answered is shown.
async function show(url, init) {
  const r = await authed(url, init);
  if (r.status === 401) forget();
  const doc = new DOMParser().parseFromString(await r.text(), "text/html");
  document.title = doc.title;
  document.body.replaceWith(document.adoptNode(doc.body));
  if (r.redirected) history.replaceState(null, "", r.url);
  bind();
}

function requestOptions(opts) {
  const pk = opts.publicKey;
  pk.challenge = b64uToBytes(pk.challenge);
  for (const c of pk.allowCredentials || []) c.id = b64uToBytes(c.id);
  return { publicKey: pk };
}

function creationOptions(opts) {
  const pk = opts.publicKey;
  pk.challenge = b64uToBytes(pk.challenge);
  pk.user.id = b64uToBytes(pk.user.id);
  for (const c of pk.excludeCredentials || []) c.id = b64uToBytes(c.id);
  return { publicKey: pk };
}

// A credential as JSON: its id and type, and its response's clientDataJSON plus `fields`.
function credentialJSON(cred, fields) {
  return {
    id: cred.id, rawId: bytesToB64u(cred.rawId), type: cred.type,
    response: { clientDataJSON: bytesToB64u(cred.response.clientDataJSON), ...fields },
    clientExtensionResults: {},
  };
}

function assertionJSON(cred) {
  const r = cred.response;
  return credentialJSON(cred, {
    authenticatorData: bytesToB64u(r.authenticatorData),
    signature: bytesToB64u(r.signature),
    userHandle: r.userHandle ? bytesToB64u(r.userHandle) : null,
  });
}

function attestationJSON(cred) {
  const r = cred.response;
  return credentialJSON(cred, {
    attestationObject: bytesToB64u(r.attestationObject),
    transports: r.getTransports ? r.getTransports() : [],
  });
}

async function signIn() {
  try {
    const opts = await post("/signin/options");
    const cred = await navigator.credentials.get(requestOptions(opts));
    const done = await post("/signin", { nonce: opts.nonce, credential: assertionJSON(cred) });
    remember(done.session);
    await show(location.href);
  } catch (e) { say("Not signed in: " + e.message, true); }
}

async function pair(button) {
  const token = button.dataset.token;
  const name = (document.getElementById("passkey-name") || {}).value || "passkey";
  try {
    const opts = await post("/pair/" + token + "/options");
    const cred = await navigator.credentials.create(creationOptions(opts));
    const done = await post("/pair/" + token,
      { nonce: opts.nonce, name: name, credential: attestationJSON(cred) });
    remember(done.session);
    say("Passkey registered.", false);
    location.href = "/";
  } catch (e) { say("Not registered: " + e.message, true); }
}

// Each page shown gets a new generation; a loop of an earlier one stops.
let shown = 0;

// The run's progress: the line `placet accept` draws (the server words it: `line`), as
// text, and the bar (bytes, or ops when none move).
function drawProgress(p) {
  let box = document.getElementById("progress");
  if (!box) {
    const st = document.getElementById("status");
    if (!st) return;
    box = document.createElement("div");
    box.id = "progress";
    box.append(document.createElement("progress"), " ", document.createElement("span"));
    box.children[0].id = "progress-bar";
    box.children[1].id = "progress-line";
    st.after(box);
  }
  const bar = document.getElementById("progress-bar");
  const total = p.bytes_total || p.op_count || 1;
  bar.max = total;
  bar.value = Math.min(p.bytes_total ? p.bytes_done : p.ops_done, total);
  document.getElementById("progress-line").textContent = p.line;
}

async function watch(pid, generation) {
  while (generation === shown) {
    await new Promise((r) => setTimeout(r, 400));
    const r = await authed("/p/" + pid + "/status");
    const data = await r.json();
    say("Status: " + data.status + (data.error ? " (" + data.error + ")" : ""), !!data.error);
    if (data.progress && generation === shown) drawProgress(data.progress);
    if (data.done) { if (generation === shown) await show(location.href); return; }
  }
}

async function accept(button) {
  const pid = button.dataset.proposal;
  const ack = document.getElementById("ack");
  if (ack && !ack.checked) { say("Tick the box: you have read placet's risk flags.", true); return; }
  const skip = Array.from(document.querySelectorAll(".op-tick"))
    .filter((b) => !b.checked).map((b) => parseInt(b.dataset.index, 10));
  button.disabled = true;
  try {
    const hash = button.dataset.hash;
    const opts = await post("/p/" + pid + "/challenge", { request_hash: hash, skip_ops: skip });
    const cred = await navigator.credentials.get(requestOptions(opts));
    await post("/p/" + pid + "/accept",
      { nonce: opts.nonce, request_hash: hash, skip_ops: skip, credential: assertionJSON(cred) });
    say("Accepted; executing...", false);
    await watch(pid, shown);
  } catch (e) { say("Not accepted: " + e.message, true); button.disabled = false; }
}

// The queue's selection for a set: each box keeps the request hash it was shown with.
function picks() { return Array.from(document.querySelectorAll("input.pick:checked")); }

function showPicks() {
  const bar = document.getElementById("set-bar");
  if (!bar) return;
  const chosen = picks();
  bar.hidden = chosen.length === 0;
  document.getElementById("set-summary").textContent = chosen.length + " selected (id, request hash): "
    + chosen.map((b) => "#" + b.dataset.proposal + " " + b.dataset.hash.slice(0, 12)).join(", ");
  document.getElementById("set-ack-label").hidden = !chosen.some((b) => b.dataset.flags !== "0");
}

// Several proposals accepted with one assertion: the challenge binds each id with the
// request hash shown; all of them or none (placet.web.sets).
async function acceptSet(button) {
  const chosen = picks();
  if (chosen.length < 2) { say("Select two proposals or more (accept one on its own page).", true); return; }
  const label = document.getElementById("set-ack-label");
  if (!label.hidden && !document.getElementById("set-ack").checked) {
    say("Tick the box: you have read placet's risk flags of the flagged ones.", true); return;
  }
  const proposals = chosen.map((b) =>
    ({ proposal_id: parseInt(b.dataset.proposal, 10), request_hash: b.dataset.hash }));
  button.disabled = true;
  try {
    const opts = await post("/set/challenge", { proposals: proposals });
    const cred = await navigator.credentials.get(requestOptions(opts));
    const done = await post("/set/accept", { nonce: opts.nonce, credential: assertionJSON(cred) });
    for (const b of chosen) b.checked = false;
    say("Accepted " + done.accepted.map((a) => "#" + a.proposal_id).join(", ") + "; executing...", false);
  } catch (e) {
    say("Not accepted, none of them: " + e.message, true);
  }
  button.disabled = false;
  try { await refreshQueue(); } catch (e) { /* shown again by the live queue */ }
  showPicks();
}

// Sign the rules file the page shows: the passkey signs its SHA-256 (and a nonce); the
// server keeps the signature only if the file still hashes to what was shown.
async function signRules(button) {
  button.disabled = true;
  try {
    const hash = button.dataset.hash;
    const opts = await post("/rules/challenge", { rules_sha256: hash });
    const cred = await navigator.credentials.get(requestOptions(opts));
    await post("/rules/sign", { nonce: opts.nonce, rules_sha256: hash, credential: assertionJSON(cred) });
    await show(location.href);
    say("Signed: these rules approve in signed mode until the file changes.", false);
  } catch (e) { say("Not signed: " + e.message, true); button.disabled = false; }
}

// A form of the page (discard, extend, sign out) sent by this script with the session;
// the page it leads to is shown in place.
async function submit(form) {
  try {
    await show(form.action, { method: "POST", body: new URLSearchParams(new FormData(form)) });
  } catch (e) { say("Not sent: " + e.message, true); }
  if (form.getAttribute("action") === "/signout") forget();
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The queue read again (this page's own URL: its notice stays): the new #live in place
// of the old; its change token, or null when the answer is no queue (signed out).
async function refreshQueue() {
  const r = await authed(location.pathname + location.search);
  const doc = new DOMParser().parseFromString(await r.text(), "text/html");
  const next = doc.getElementById("live");
  const cur = document.getElementById("live");
  if (!r.ok || !next || !cur) return null;
  // the selection stays, but only on proposals still shown with the same request hash
  const kept = new Map(picks().map((b) => [b.dataset.proposal, b.dataset.hash]));
  cur.replaceWith(document.adoptNode(next));
  const gone = [];
  for (const [pid, hash] of kept) {
    const box = document.querySelector('input.pick[data-proposal="' + pid + '"]');
    if (box && box.dataset.hash === hash) box.checked = true; else gone.push("#" + pid);
  }
  if (gone.length) say("No longer selected (decided, expired or changed): " + gone.join(", "), true);
  showPicks();
  tick();
  return next.dataset.changes;
}

// Keep the queue current: /changes answers when the store changed (any process, any
// host), or after a while with the same token; the queue is then read again.
async function live(el, generation) {
  let v = el.dataset.changes;
  while (generation === shown) {
    let data;
    try {
      const r = await authed("/changes?v=" + encodeURIComponent(v));
      if (generation !== shown) return;
      if (r.status === 403) { await show(location.href); return; }  // signed out
      if (!r.ok) throw new Error("HTTP " + r.status);
      data = await r.json();
    } catch (e) { await sleep(2000); continue; }  // the server is away: try again
    if (data.closing) await sleep(2000);
    if (data.v === v || generation !== shown) continue;
    try {
      const fresh = await refreshQueue();
      if (fresh === null) { await show(location.href); return; }
      v = fresh;
    } catch (e) { await sleep(2000); }
  }
}

function tick() {
  const now = Date.now();
  for (const el of document.querySelectorAll(".countdown")) {
    if (!el.dataset.offset) {
      el.dataset.offset = String(Date.parse(el.dataset.now) - now);
    }
    const left = Math.floor((Date.parse(el.dataset.expires) - (now + Number(el.dataset.offset))) / 1000);
    if (left <= 0) { el.textContent = "expired"; continue; }
    const d = Math.floor(left / 86400), h = Math.floor((left % 86400) / 3600);
    const m = Math.floor((left % 3600) / 60), s = left % 60;
    const p = (n) => String(n).padStart(2, "0");
    el.textContent = left < 60 ? s + "s" : left < 3600 ? m + "m" + p(s) + "s"
      : left < 86400 ? h + "h" + p(m) + "m" : d + "d" + p(h) + "h";
  }
}

// What a page shown needs: the page read again with the session when the server
// answered the sign-in page for want of it (`#shell`), the live queue, the run watched,
// the countdowns.
function bind() {
  const generation = ++shown;
  const shell = document.getElementById("shell");
  if (shell && session()) {
    for (const el of shell.children) el.hidden = el.id !== "opening";
    show(location.href).catch((e) => say("Not opened: " + e.message, true));
    return;
  }
  const st = document.getElementById("status");
  if (st && st.dataset.watch) watch(st.dataset.proposal, generation);
  const lv = document.getElementById("live");
  if (lv && lv.dataset.changes) live(lv, generation);
  showPicks();
  tick();
}

document.addEventListener("click", (e) => {
  const el = e.target.closest("#signin, #pair, #accept, #accept-set, #sign-rules");
  if (!el) return;
  ({ signin: signIn, pair: pair, accept: accept, "accept-set": acceptSet, "sign-rules": signRules })[el.id](el);
});

document.addEventListener("change", (e) => {
  if (e.target.matches && e.target.matches("input.pick")) showPicks();
});

document.addEventListener("submit", (e) => {
  e.preventDefault();
  submit(e.target);
});

document.addEventListener("DOMContentLoaded", () => {
  bind();
  setInterval(tick, 1000);
});
