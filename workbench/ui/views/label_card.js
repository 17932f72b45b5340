// The Label page's card (st.components.v2, mounted in the page's DOM): draws the pair sent from
// Python, keeps the evidence cursor and the chosen units, and turns key presses into actions.
// One document-level key listener serves the card wherever the focus is, except text boxes.
const W = window.__workbenchLabel || (window.__workbenchLabel = {
  installed: false, token: null, position: null, shownAt: null, cursor: 0, chosen: new Set(),
  sent: false, seq: 0, inflight: 0, queue: [], ahead: [], minMs: 300, units: 0, root: null, hits: [],
  send: null, setChosen: null, focusCard: false, dirty: false,
  win: null, scope: null, sentAids: {}, replayed: {}, inflightAction: null, inflightAt: 0, resendMs: 5000,
});

// The outbox: every answer a key gives (label, skip, can't judge) is written to the browser's
// localStorage before it is sent, and dropped once the server has handled it (the card's "ack").
// A key press still on its way when the tab reloads or closes (sent but not handled, or queued
// behind the one before it) is thus still here when the Label page opens again for the same
// sample and annotator, and is sent again ("replay"); the answer's id (aid) makes the server
// store it once even when the first sending did arrive. Entries of a tab that is still open
// (its heartbeat is fresh) are left to that tab, and sent by this page once that tab is gone:
// looked at again every second, since a closed tab's heartbeat can stay fresh for LIVE_MS after
// this page opened (its pagehide, which removes it, does not run when the tab is closed on a
// loaded machine or its renderer is killed), and a tab open beside this one may close later.
const OUTBOX = "wb-label-outbox";
const LIVE = "wb-label-live:";
const LIVE_MS = 3000;

function newId() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);  // available on plain http too (randomUUID is not)
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

function outbox() {
  try { const v = JSON.parse(localStorage.getItem(OUTBOX) || "[]"); return Array.isArray(v) ? v : []; }
  catch (e) { return []; }
}

function setOutbox(list) {
  try { if (list.length) localStorage.setItem(OUTBOX, JSON.stringify(list)); else localStorage.removeItem(OUTBOX); }
  catch (e) { /* storage full or off: the server-side store still keeps what reached it */ }
}

function heartbeat() {
  try { localStorage.setItem(LIVE + W.win, String(Date.now())); } catch (e) { /* see setOutbox */ }
}

function isLive(win) {
  if (win === W.win) return true;
  try { return Date.now() - Number(localStorage.getItem(LIVE + win) || 0) < LIVE_MS; } catch (e) { return false; }
}

function settle(ack) {  // the server handled every action up to seq ack: their answers leave the outbox
  const done = new Set();
  for (const seq of Object.keys(W.sentAids)) {
    if (Number(seq) <= ack) { W.sentAids[seq].forEach((a) => done.add(a)); delete W.sentAids[seq]; }
  }
  if (done.size) setOutbox(outbox().filter((e) => !done.has(e.aid)));
}

function unsaved() { return (W.inflight ? 1 : 0) + W.queue.length; }

function replay() {  // the answers pages of this browser that are gone left for this sample, each sent once
  if (!W.scope || !W.send || !W.root || !W.root.isConnected) return;
  const left = outbox().filter((e) => e.scope === W.scope && !W.replayed[e.aid] && !isLive(e.win));
  if (!left.length) return;
  left.forEach((e) => { W.replayed[e.aid] = true; });  // sent again by resendLate until handled
  dispatch({ kind: "replay", answers: left.map((e) => e.action) }, left.map((e) => e.aid));
  note(`Sending ${left.length} answer${left.length > 1 ? "s" : ""} given before the page was reloaded or closed…`, "info");
}

function isTextBox(el) {
  if (!el || !el.tagName) return false;
  if (el.isContentEditable) return true;
  const tag = el.tagName.toUpperCase();
  if (tag === "TEXTAREA" || tag === "SELECT") return true;
  if (tag !== "INPUT") return false;
  const type = (el.getAttribute("type") || "text").toLowerCase();
  return !["checkbox", "radio", "button", "submit", "reset", "range", "color", "file", "image"].includes(type);
}

function isAnnotatorBox(el) {
  return !!el && el.tagName === "INPUT" && el.getAttribute("aria-label") === "Annotator";
}

function card() { return W.root ? W.root.querySelector(".wb-card") : null; }

function note(text, kind) {
  const el = W.root && W.root.querySelector("[data-testid='label-key-note']");
  if (!el) return;
  el.textContent = text || "";
  el.dataset.kind = kind || "";
  el.style.display = text ? "block" : "none";
}

function paint() {
  const c = card();
  if (!c) return;
  const units = c.querySelectorAll(".wb-unit");
  units.forEach((u) => {
    const i = Number(u.dataset.unit);
    u.classList.toggle("wb-cursor", i === W.cursor);
    u.classList.toggle("wb-chosen", W.chosen.has(i));
  });
  const list = c.querySelector("[data-testid='label-evidence']");
  if (list) {
    list.textContent = "";
    const picked = Array.from(W.chosen).sort((a, b) => a - b);
    const head = document.createElement("div");
    head.className = "wb-evidence-head";
    head.textContent = picked.length
      ? `Evidence (${picked.length} sentence${picked.length > 1 ? "s" : ""}):`
      : "Evidence: none chosen (grades 2 and 3 need at least one sentence: ↓/↑ or j/k, then Space).";
    list.appendChild(head);
    const ol = document.createElement("ol");
    for (const i of picked) {
      const li = document.createElement("li");
      const u = c.querySelector(`.wb-unit[data-unit="${i}"]`);
      li.textContent = u ? u.textContent : "";
      ol.appendChild(li);
    }
    if (picked.length) list.appendChild(ol);
  }
  const at = c.querySelector(`.wb-unit[data-unit="${W.cursor}"]`);
  if (at && at.scrollIntoView) at.scrollIntoView({ block: "nearest" });
}

function markShown() {
  W.shownAt = document.visibilityState === "visible" ? performance.now() : null;
}

document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible" && W.shownAt === null && W.token) W.shownAt = performance.now();
  else if (document.visibilityState !== "visible") W.shownAt = null;  // hidden: the count starts again
});

function draw(pair) {
  const c = card();
  if (!c) return;
  c.querySelector(".wb-pair").innerHTML = pair.html;  // escaped in Python (html.escape)
  c.dataset.token = pair.token;
  W.token = pair.token;
  W.position = pair.position;
  W.units = pair.units;
  // the first sentence holding a query term (headings skipped), worked out in Python
  W.cursor = Math.max(0, Math.min(pair.units - 1, Number(pair.cursor || 0)));
  W.hits = (pair.hits || []).slice();
  W.chosen = new Set(pair.chosen || []);
  W.dirty = false;
  W.sent = false;
  markShown();
  note("");
  paint();
  const box = document.activeElement;
  if (W.focusCard || isAnnotatorBox(box)) { W.focusCard = false; c.focus({ preventScroll: true }); }
}

function dispatch(action, aids) {
  action.seq = ++W.seq;
  if (["label", "skip", "cant_judge"].includes(action.kind)) {
    action.aid = newId();
    setOutbox([...outbox(), { aid: action.aid, scope: W.scope, win: W.win, at: Date.now(), action }]);
    aids = [action.aid];
  }
  if (aids) W.sentAids[action.seq] = aids;
  if (W.inflight) { W.queue.push(action); return; }
  send(action);
}

// One action travels at a time; the server's ack (the card's data) lets the next one go. An
// action whose ack has not come after RESEND_MS is sent again, same seq and aid: a message or a
// run lost on the way (a busy machine, a rerun cut short) would otherwise hold every later key
// press in the queue. The server handles a seq once and stores an aid once, so a second copy
// of one that did arrive changes nothing (W.resendMs, so a test can hold a copy back).

function send(action) {
  W.inflight = action.seq;
  W.inflightAction = action;
  W.inflightAt = performance.now();
  W.send(action);
}

function resendLate() {
  if (!W.inflight || !W.inflightAction || !W.send || !W.root || !W.root.isConnected) return;
  if (performance.now() - W.inflightAt < W.resendMs) return;
  W.inflightAt = performance.now();
  W.send(W.inflightAction);
}

function visibleMs() { return W.shownAt === null ? 0 : performance.now() - W.shownAt; }

function answer(kind, grade) {
  if (!W.token) return;
  if (W.sent) { note("This pair's answer is already given; the key was ignored.", "warning"); return; }
  const seen = visibleMs();
  if (seen < W.minMs) {
    note(`Too early: this pair has been on screen ${Math.round(seen)} ms (at least ${W.minMs} ms); ` +
         "the key was ignored. Press it again.", "warning");
    return;
  }
  const units = Array.from(W.chosen).sort((a, b) => a - b);
  if (kind === "label" && grade >= 2 && !units.length) {
    note(`Grade ${grade} refused: grades 2 and 3 need evidence. Move to a sentence with ↓/↑ (or j/k), ` +
         "press Space, then the grade. Nothing was stored.", "warning");
    return;
  }
  W.sent = true;
  dispatch({ kind, grade: kind === "label" ? grade : null, token: W.token, position: W.position,
             units: kind === "label" ? units : [], visible_ms: Math.round(seen) });
  if (W.ahead.length) draw(W.ahead.shift());  // the pair after it, held already: on screen at once
  else note("Saving…", "info");
  if (unsaved() > 1) note(`${unsaved()} answers on their way to the server…`, "info");
}

// Choose or drop evidence unit i: Space (the unit under the cursor) and a click (the unit
// clicked, which becomes the cursor) both come here. Client-side only: nothing goes to the
// server (a state value sent from here would rerun the card); the chosen units travel with
// the grade key's action, and reach a Streamlit button through flushChosen() just before it acts.
function toggle(i) {
  if (W.sent || i < 0 || i >= W.units) return;
  W.cursor = i;
  if (W.chosen.has(i)) W.chosen.delete(i); else W.chosen.add(i);
  W.dirty = true;
  paint();
}

// The grade / skip buttons are Streamlit buttons: their callback reads the card's "chosen"
// state, so it is sent (once, when it changed) as the pointer or Enter reaches such a button.
function flushChosen() {
  if (!W.dirty || !W.setChosen || !W.token) return;
  W.dirty = false;
  W.setChosen("chosen", { token: W.token, units: Array.from(W.chosen).sort((a, b) => a - b) });
}

function isOutsideButton(el) {
  const b = el && el.closest && el.closest("button");
  return !!b && !(W.root && W.root.contains(b));
}

// n / N: the cursor to the next / previous unit holding a query term (none that way: stays).
function jump(delta) {
  if (!W.units || !W.hits.length) return;
  const to = delta > 0 ? W.hits.find((i) => i > W.cursor) : W.hits.slice().reverse().find((i) => i < W.cursor);
  if (to !== undefined) { W.cursor = to; paint(); }
}

// Shift+↓ / Shift+↑: choose the unit under the cursor and the one the cursor moves to, so a
// run of sentences is chosen by holding Shift (client-side only, as Space).
function extend(delta) {
  if (W.sent || !W.units) return;
  W.chosen.add(W.cursor);
  W.cursor = Math.max(0, Math.min(W.units - 1, W.cursor + delta));
  W.chosen.add(W.cursor);
  W.dirty = true;
  paint();
}

function onKey(e) {
  if (!W.root || !W.root.isConnected || !card()) return;
  const t = e.target;
  if (e.key === "Enter" && isOutsideButton(t)) flushChosen();  // a focused button about to act
  if (isTextBox(t)) {
    if (e.key === "Enter" && isAnnotatorBox(t)) { W.focusCard = true; setTimeout(() => { const c = card(); if (c) c.focus({ preventScroll: true }); }, 0); }
    if (e.key === "Escape") { const c = card(); if (c) { t.blur(); c.focus({ preventScroll: true }); } }
    return;
  }
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const k = e.key;
  let handled = true;
  if (e.shiftKey && (k === "ArrowDown" || k === "ArrowUp")) extend(k === "ArrowDown" ? 1 : -1);
  else if (k === "n") jump(1);
  else if (k === "N") jump(-1);
  else if (k === "ArrowDown" || k === "j") { if (W.units) { W.cursor = Math.min(W.units - 1, W.cursor + 1); paint(); } }
  else if (k === "ArrowUp" || k === "k") { if (W.units) { W.cursor = Math.max(0, W.cursor - 1); paint(); } }
  else if (k === " " || k === "Spacebar") { if (!e.repeat) toggle(W.cursor); }
  else if (["0", "1", "2", "3"].includes(k)) { if (!e.repeat) answer("label", Number(k)); }
  else if (k === "s" || k === "S") { if (!e.repeat) answer("skip", null); }
  else if (k === "x" || k === "X") { if (!e.repeat) answer("cant_judge", null); }
  else if (k === "u" || k === "U") { if (!e.repeat) dispatch({ kind: "undo" }); }
  else if (k === "ArrowLeft") { if (!e.repeat) dispatch({ kind: "prev", position: W.position }); }
  else if (k === "ArrowRight") { if (!e.repeat) dispatch({ kind: "next", position: W.position }); }
  else handled = false;
  if (handled) { e.preventDefault(); e.stopPropagation(); }
}

function onKeyUp(e) {  // a focused button or box must not act on Space / Enter the card took
  if (!W.root || !W.root.isConnected || isTextBox(e.target)) return;
  if (e.key === " ") e.preventDefault();
}

export default function (component) {
  const { data, parentElement, setTriggerValue, setStateValue } = component;
  W.send = (action) => setTriggerValue("action", action);
  W.setChosen = setStateValue;
  W.root = parentElement;
  if (!W.installed) {
    document.addEventListener("keydown", onKey, true);
    document.addEventListener("keyup", onKeyUp, true);
    document.addEventListener("pointerdown", (e) => { if (isOutsideButton(e.target)) flushChosen(); }, true);
    // Leaving while an answer is on its way: the browser asks first (the outbox keeps it anyway).
    window.addEventListener("beforeunload", (e) => { if (unsaved()) { e.preventDefault(); e.returnValue = ""; } });
    window.addEventListener("pagehide", () => { try { localStorage.removeItem(LIVE + W.win); } catch (e) { /* */ } });
    W.win = newId();
    heartbeat();
    setInterval(() => { heartbeat(); resendLate(); replay(); }, 1000);
    W.installed = true;
  }
  let c = card();
  if (!c) {
    c = document.createElement("div");
    c.className = "wb-card";
    c.tabIndex = -1;
    c.setAttribute("data-testid", "label-card");
    c.innerHTML = '<div class="wb-pair"></div><div data-testid="label-key-note" class="wb-note" role="status" style="display:none"></div>';
    parentElement.appendChild(c);
    c.addEventListener("click", (e) => {
      const u = e.target.closest && e.target.closest(".wb-unit");
      if (!u) return;
      e.preventDefault();
      toggle(Number(u.dataset.unit));  // the same path as Space
      c.focus({ preventScroll: true });  // the keys after the click act on the card
    });
    W.token = null;
  }
  W.minMs = Number(data.min_ms || 0);
  if (data.annotator) {
    document.cookie = "workbench_annotator=" + encodeURIComponent(data.annotator) +
      "; path=/; max-age=31536000; SameSite=Lax";
  }
  W.scope = data.scope || null;
  settle(data.ack || 0);
  if ((data.ack || 0) >= W.inflight) {
    W.inflight = 0;
    W.inflightAction = null;
    if (W.queue.length) send(W.queue.shift());
  }
  replay();
  // While an action is still on its way the server is behind what the browser shows: keep it.
  if (W.inflight) return () => { if (W.root === parentElement) W.root = null; };
  W.ahead = (data.ahead || []).slice();
  if (!data.pair) {
    W.token = null; W.ahead = [];
    c.querySelector(".wb-pair").innerHTML = "";
    note("");
  } else if (data.pair.token !== W.token) {
    draw(data.pair);
  } else if (!W.inflight && !W.queue.length && W.sent && !data.pair.taken) {
    W.sent = false;  // the answer was not taken (the page said why): the pair can be answered again
    note("");
  }
  return () => { if (W.root === parentElement) W.root = null; };
}
