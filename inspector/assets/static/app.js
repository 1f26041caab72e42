// The inspector's one script: live updates, nothing else. Without it the
// pages still work; they only stop updating by themselves.
"use strict";

// The list's first page fetches its rows again every few seconds while the
// tab is visible.
function liveRows() {
  const body = document.querySelector("tbody[data-live]");
  if (!body) return;
  setInterval(async () => {
    if (document.hidden) return;
    try {
      const r = await fetch(body.dataset.live, { headers: { Accept: "text/html" } });
      if (r.ok) body.innerHTML = await r.text();
    } catch (e) { /* the next tick tries again */ }
  }, 2000);
}

// A session's page follows its log: blocks (turns) rendered again by the
// server, the header, and token deltas appended to the streaming step.
function liveSession() {
  const head = document.querySelector("#head[data-live]");
  if (!head) return;
  const timeline = document.getElementById("timeline");
  const pending = new Map(); // step id -> text that came before its element
  const src = new EventSource(head.dataset.live);
  // A page left for another keeps its stream open while the browser keeps
  // the page (its back/forward cache), and a browser opens six connections
  // a host at most: the seventh page waited until one was dropped (a
  // minute, in chromium). The stream is closed when the page is left, and
  // the page read again if the browser shows it once more.
  src.addEventListener("open", () => { document.body.dataset.live = "open"; });
  window.addEventListener("pagehide", () => src.close());
  window.addEventListener("pageshow", (ev) => { if (ev.persisted) location.reload(); });
  src.addEventListener("block", (ev) => {
    const { key, html } = JSON.parse(ev.data);
    const open = new Set([...document.querySelectorAll(`#${CSS.escape(key)} details[open]`)].map(pathOf));
    const closed = new Set([...document.querySelectorAll(`#${CSS.escape(key)} details:not([open])`)].map(pathOf));
    const tpl = document.createElement("template");
    tpl.innerHTML = html.trim();
    const next = tpl.content.firstElementChild;
    const old = document.getElementById(key);
    if (old) old.replaceWith(next); else timeline.appendChild(next);
    next.querySelectorAll("details").forEach((d) => {
      const p = pathOf(d);
      if (open.has(p)) d.open = true;
      if (closed.has(p)) d.open = false;
    });
    next.querySelectorAll("pre.live").forEach((pre) => {
      const id = pre.id.slice("live-".length);
      if (pending.has(id)) pre.textContent = pending.get(id);
    });
  });
  src.addEventListener("head", (ev) => {
    const { html, seq, can, awaiting } = JSON.parse(ev.data);
    // Calls came to await approval, or were decided elsewhere: the page
    // is read again, for the approval card and its forms.
    if (awaiting !== undefined && awaiting !== !!document.querySelector(".approval")) {
      src.close();
      location.reload();
      return;
    }
    head.innerHTML = html;
    head.dataset.seq = seq;
    // The actions that apply now: a button that cannot is disabled (the
    // server refuses it too, without touching the log).
    document.querySelectorAll("button[data-can]").forEach((b) => {
      if (can && b.dataset.can in can) b.disabled = !can[b.dataset.can];
    });
  });
  src.addEventListener("delta", (ev) => {
    const { step, text } = JSON.parse(ev.data);
    const all = (pending.get(step) || "") + text;
    pending.set(step, all);
    const pre = document.getElementById("live-" + step);
    if (pre) pre.textContent = all;
  });
}

// pathOf names a <details> by its step and place, to keep it open or closed
// across a re-render.
function pathOf(d) {
  const step = d.closest(".step");
  const all = step ? [...step.querySelectorAll("details")] : [];
  return (step ? step.id : "") + ":" + all.indexOf(d);
}

document.addEventListener("DOMContentLoaded", () => { liveRows(); liveSession(); });
