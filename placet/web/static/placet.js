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

async function post(url, body) {
  const r = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify(body || {}),
  });
  let data = {};
  try { data = await r.json(); } catch (e) { data = { ok: false, message: "HTTP " + r.status }; }
  if (!r.ok || data.ok === false) {
    throw new Error((data.code ? data.code + ": " : "") + (data.message || ("HTTP " + r.status)));
  }
  return data;
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
    await post("/signin", { nonce: opts.nonce, credential: assertionJSON(cred) });
    location.reload();
  } catch (e) { say("Not signed in: " + e.message, true); }
}

async function pair(button) {
  const token = button.dataset.token;
  const name = (document.getElementById("passkey-name") || {}).value || "passkey";
  try {
    const opts = await post("/pair/" + token + "/options");
    const cred = await navigator.credentials.create(creationOptions(opts));
    await post("/pair/" + token, { nonce: opts.nonce, name: name, credential: attestationJSON(cred) });
    say("Passkey registered.", false);
    location.href = "/";
  } catch (e) { say("Not registered: " + e.message, true); }
}

async function watch(pid) {
  for (;;) {
    await new Promise((r) => setTimeout(r, 400));
    const r = await fetch("/p/" + pid + "/status", { credentials: "same-origin" });
    const data = await r.json();
    say("Status: " + data.status + (data.error ? " (" + data.error + ")" : ""), !!data.error);
    if (data.done) { location.reload(); return; }
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
    const shown = button.dataset.hash;
    const opts = await post("/p/" + pid + "/challenge", { request_hash: shown, skip_ops: skip });
    const cred = await navigator.credentials.get(requestOptions(opts));
    await post("/p/" + pid + "/accept",
      { nonce: opts.nonce, request_hash: shown, skip_ops: skip, credential: assertionJSON(cred) });
    say("Accepted; executing...", false);
    await watch(pid);
  } catch (e) { say("Not accepted: " + e.message, true); button.disabled = false; }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The queue read again (this page's own URL: its notice stays): the new #live in place
// of the old; its change token, or null when the answer is no queue (signed out).
async function refreshQueue() {
  const r = await fetch(location.pathname + location.search, { credentials: "same-origin" });
  const doc = new DOMParser().parseFromString(await r.text(), "text/html");
  const next = doc.getElementById("live");
  const cur = document.getElementById("live");
  if (!r.ok || !next || !cur) return null;
  cur.replaceWith(document.adoptNode(next));
  tick();
  return next.dataset.changes;
}

// Keep the queue current: /changes answers when the store changed (any process, any
// host), or after a while with the same token; the queue is then read again.
async function live(el) {
  let v = el.dataset.changes;
  for (;;) {
    let data;
    try {
      const r = await fetch("/changes?v=" + encodeURIComponent(v), { credentials: "same-origin" });
      if (r.status === 403) { location.reload(); return; }  // signed out: the sign-in page
      if (!r.ok) throw new Error("HTTP " + r.status);
      data = await r.json();
    } catch (e) { await sleep(2000); continue; }  // the server is away: try again
    if (data.closing) await sleep(2000);
    if (data.v === v) continue;
    try {
      const fresh = await refreshQueue();
      if (fresh === null) { location.reload(); return; }
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

document.addEventListener("DOMContentLoaded", () => {
  const on = (id, fn) => { const el = document.getElementById(id); if (el) el.addEventListener("click", () => fn(el)); };
  on("signin", signIn);
  on("pair", pair);
  on("accept", accept);
  const st = document.getElementById("status");
  if (st && st.dataset.watch) watch(st.dataset.proposal);
  const lv = document.getElementById("live");
  if (lv && lv.dataset.changes) live(lv);
  tick();
  setInterval(tick, 1000);
});
