// wrtfd pit-wall page: renders the daemon's pushed updates (Server-Sent Events from /api/events).
// No framework, no build step: plain DOM. Reconnects by itself when the daemon restarts.
"use strict";

const TRACE_S = 30;            // seconds of trace drawn
const STALE_MS = 20000;        // no message for this long: reconnect (keep-alives come every 15 s)
let csrf = null;
let source = null;
let lastMessage = 0;
let lastUpdate = null;
const traces = {};             // group -> role -> [[t_us, value], ...]

const $ = (id) => document.getElementById(id);

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

function fmtLap(s) {
  if (s === null || s === undefined || !isFinite(s)) return "–";
  const ms = Math.round(s * 1000);
  const m = Math.floor(ms / 60000);
  const rest = (ms % 60000) / 1000;
  return m ? `${m}:${rest.toFixed(3).padStart(6, "0")}` : rest.toFixed(3);
}

function fmtDuration(s) {
  if (s === null || s === undefined || !isFinite(s) || s < 0) return "–";
  s = Math.floor(s);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return (h ? `${h}:${String(m).padStart(2, "0")}` : `${m}`) + `:${String(sec).padStart(2, "0")}`;
}

function fmtBytes(b) {
  if (b === null || b === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return `${b.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function basename(p) { return p ? String(p).split("/").pop() : "–"; }

function setConn(ok, text) {
  const c = $("conn");
  c.textContent = text;
  c.className = "pill " + (ok ? "ok" : "bad");
  $("mark").disabled = !ok || !csrf;
}

function connect() {
  if (source) source.close();
  setConn(false, "connecting…");
  source = new EventSource("/api/events");
  source.addEventListener("hello", (ev) => {
    const hello = JSON.parse(ev.data);
    csrf = hello.can_write ? hello.csrf : null;
    lastMessage = Date.now();
    setConn(true, "live");
    $("footer").textContent = `wrtfd ${hello.version}`;
  });
  source.addEventListener("update", (ev) => {
    lastMessage = Date.now();
    setConn(true, "live");
    render(JSON.parse(ev.data));
  });
  source.onmessage = () => { lastMessage = Date.now(); };
  source.onerror = () => {
    setConn(false, "reconnecting…");
    if (source.readyState === EventSource.CLOSED) setTimeout(connect, 2000);
  };
}

setInterval(() => {
  if (lastMessage && Date.now() - lastMessage > STALE_MS) { lastMessage = 0; connect(); }
}, 2000);

function groupState(g) {
  if (g.state === "failing" || g.state === "stalled") return ["failing", "bad"];
  const trig = g.trigger || {};
  if (trig.record === "triggered") {
    if (trig.state === "recording") return ["recording", "ok"];
    return g.in_session ? [`armed ${Number(trig.buffer_s || 0).toFixed(0)} s`, "warn"] : ["idle", "idle"];
  }
  return g.in_session ? ["recording", "ok"] : ["idle", "idle"];
}

function render(u) {
  lastUpdate = u;
  renderAlerts(u.alerts || []);
  renderGroups(u);
  renderTeam((u.fleet || {}).team);
  renderDisk(u.disk || {});
  renderSources(u.sources || {});
  renderEvents(((u.live || {}).events) || []);
}

function renderAlerts(alerts) {
  const box = $("alerts");
  box.replaceChildren(...alerts.map((a) => el("div", "alert " + a.level, a.text)));
}

function ensureCard(name) {
  let card = document.querySelector(`[data-group="${CSS.escape(name)}"]`);
  if (card) return card;
  card = el("section", "card group");
  card.dataset.group = name;
  const head = el("div", "ghead");
  head.append(el("h2", null, name), el("span", "pill state"));
  const info = el("div", "info");
  const gauges = el("div", "gauges");
  const laps = el("div", "laps");
  const canvas = el("canvas", "trace");
  canvas.width = 600; canvas.height = 150;
  // GNSS lap timing: lay the start/finish line where the car is (wrtfd mark --start-finish)
  const sf = el("button", "sfbtn", "SET START/FINISH");
  sf.type = "button";
  sf.hidden = true;
  sf.addEventListener("click", () => startFinish(sf));
  card.append(head, info, gauges, laps, sf, canvas);
  $("groups").append(card);
  return card;
}

function gauge(label, value, unit, cls) {
  const g = el("div", "gauge " + (cls || ""));
  g.append(el("div", "gval", value), el("div", "glabel", unit ? `${label} ${unit}` : label));
  return g;
}

function pedal(label, v, cls) {
  const g = el("div", "gauge pedal " + cls);
  const bar = el("div", "bar");
  const fill = el("div", "fill");
  fill.style.width = `${Math.round(Math.max(0, Math.min(1, v || 0)) * 100)}%`;
  bar.append(fill);
  g.append(el("div", "gval", v === null || v === undefined ? "–" : `${Math.round(v * 100)}%`), bar, el("div", "glabel", label));
  return g;
}

function speedDisplay(value, unit) {
  if (value === null || value === undefined) return ["–", unit || ""];
  if (unit === "m/s") return [(value * 3.6).toFixed(0), "km/h"];
  return [Number(value).toFixed(0), unit || ""];
}

function renderGroups(u) {
  const groups = ((u.recorder || {}).groups) || {};
  const live = ((u.live || {}).groups) || {};
  const channels = {};
  for (const [name, g] of Object.entries(groups)) {
    const card = ensureCard(name);
    const [stateText, stateCls] = groupState(g);
    const pill = card.querySelector(".state");
    pill.textContent = stateText.toUpperCase();
    pill.className = "pill state " + stateCls;
    card.dataset.state = stateText.split(" ")[0];
    const start = g.session_start_us;
    const dur = g.in_session && start ? (u.time_us - start) / 1e6 : null;
    const info = card.querySelector(".info");
    info.replaceChildren(
      el("div", null, `file ${basename(g.file)}`),
      el("div", null, g.session === null || g.session === undefined ? "no session" :
        `session #${g.session} · ${fmtDuration(dur)}`),
      el("div", null, g.trigger && g.trigger.record === "triggered" ?
        `pre-trigger ${Number(g.trigger.buffer_s || 0).toFixed(1)} s / ${g.trigger.pre_trigger_s} s · ${fmtBytes(g.trigger.buffer_bytes)}` :
        `${(g.frame_rate_hz || 0).toFixed(0)} frames/s · markers: ${g.markers || 0}`),
    );
    const lv = live[name] || {};
    const vals = lv.values || {};
    const units = {};
    for (const ch of ((u.live || {}).channels || {})[name] || []) units[ch.role] = ch.unit;
    channels[name] = units;
    const gauges = card.querySelector(".gauges");
    const [sv, su] = speedDisplay(vals.speed, units.speed);
    const items = [];
    if ("speed" in vals) items.push(gauge("speed", sv, su, "big speed"));
    if ("gear" in vals) items.push(gauge("gear", vals.gear === null ? "–" : String(vals.gear), "", "big gear"));
    if ("rpm" in vals) items.push(gauge("rpm", vals.rpm === null ? "–" : Math.round(vals.rpm).toString(), "", "rpm"));
    if ("throttle" in vals) items.push(pedal("throttle", vals.throttle, "thr"));
    if ("brake" in vals) items.push(pedal("brake", vals.brake, "brk"));
    gauges.replaceChildren(...items);
    const lapsLive = g.laps_live ? Object.values(g.laps_live)[0] : null;
    renderLaps(card.querySelector(".laps"), lv.lap, lapsLive, g.derived && g.derived.laps);
    const sf = card.querySelector(".sfbtn");
    sf.hidden = !(lapsLive && "circuit" in lapsLive);
    if (!sf.dataset.busy) sf.disabled = !csrf;
    addTrace(name, lv);
    drawTrace(card.querySelector("canvas"), name, units);
  }
}

// A GNSS lap as timed at the line, its refined time to come (docs/circuits.md): marked until then.
function refiningText(lap) {
  return lap && lap.final === false ? " · refining" : "";
}

function sectorsText(lap) {
  if (!lap || !lap.sectors_s || lap.sectors_s.length < 2) return "";
  return " (" + lap.sectors_s.map((s) => fmtLap(s)).join(" · ") + ")";
}

function fmtDelta(s) {
  if (s === null || s === undefined || !isFinite(s)) return "–";
  return (s < 0 ? "−" : "+") + Math.abs(s).toFixed(2);
}

// Negative: ahead of the reference lap (gaining, green); positive: behind it (losing, red).
function deltaClass(s) {
  if (s === null || s === undefined || !isFinite(s)) return "none";
  return s < 0 ? "gain" : s > 0 ? "loss" : "even";
}

function renderDelta(lap, lapsLive) {
  const d = lap ? lap.delta_s : null;
  const box = el("div", "delta " + deltaClass(d));
  const ref = lapsLive && lapsLive.reference;
  const refText = ref ? `vs ${fmtLap(ref.time_s)} (${ref.origin === "session" ? `lap ${ref.number}` : ref.origin})` : "no reference lap yet";
  const last = lap && lap.last_delta_s !== null && lap.last_delta_s !== undefined ? ` · last lap ${fmtDelta(lap.last_delta_s)}` : "";
  box.append(
    el("div", "dval", fmtDelta(d)),
    el("div", "dpred", `predicted ${fmtLap(lap ? lap.predicted_s : null)}`),
    el("div", "dref", refText + last),
  );
  return box;
}

function renderLaps(box, lap, lapsLive, summary) {
  if (!lap && !lapsLive && !summary) { box.replaceChildren(); return; }
  const current = lap ? `lap ${lap.number} · ${fmtLap(lap.time_s)}` : "–";
  const pit = lapsLive && lapsLive.last && lapsLive.last.pit ? ` ${lapsLive.last.pit}-lap` : "";
  const last = lapsLive && lapsLive.last ? `${fmtLap(lapsLive.last.time_s)}${pit}${sectorsText(lapsLive.last)}${refiningText(lapsLive.last)}` : "–";
  const best = lapsLive && lapsLive.best ? `${fmtLap(lapsLive.best.time_s)} (lap ${lapsLive.best.number})${sectorsText(lapsLive.best)}${refiningText(lapsLive.best)}` : "–";
  const rows = [["current", current, "current"], ["last", last, "last"], ["best", best, "best"]];
  if (lapsLive && "circuit" in lapsLive) rows.push(["circuit", lapsLive.circuit || "none yet: set the line", "circuit"]);
  const items = rows.map(([k, v, cls]) => {
    const r = el("div", "laprow " + cls);
    r.append(el("span", "k", k), el("span", "v", v));
    return r;
  });
  if (lap && "delta_s" in lap) items.unshift(renderDelta(lap, lapsLive));
  box.replaceChildren(...items);
}

function addTrace(group, lv) {
  if (!lv.trace || !lv.trace_times_us) return;
  const t = traces[group] || (traces[group] = {});
  for (const [role, pts] of Object.entries(lv.trace)) {
    const arr = t[role] || (t[role] = []);
    pts.forEach((v, i) => arr.push([lv.trace_times_us[i], v]));
    const cutoff = lv.time_us - TRACE_S * 1e6;
    while (arr.length && arr[0][0] < cutoff) arr.shift();
  }
}

function drawTrace(canvas, group, units) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height;
  ctx.fillStyle = "#000"; ctx.fillRect(0, 0, w, h);
  const t = traces[group];
  if (!t) return;
  const now = Math.max(...Object.values(t).map((a) => (a.length ? a[a.length - 1][0] : 0)));
  const x = (tu) => w - ((now - tu) / (TRACE_S * 1e6)) * w;
  const line = (pts, color, scale) => {
    ctx.strokeStyle = color; ctx.lineWidth = 3; ctx.beginPath();
    let started = false;
    for (const [tu, v] of pts) {
      if (v === null) { started = false; continue; }
      const y = h - 4 - scale(v) * (h - 8);
      if (started) ctx.lineTo(x(tu), y); else { ctx.moveTo(x(tu), y); started = true; }
    }
    ctx.stroke();
  };
  if (t.throttle) line(t.throttle, "#00e060", (v) => Math.max(0, Math.min(1, v)));
  if (t.brake) line(t.brake, "#ff3030", (v) => Math.max(0, Math.min(1, v)));
  if (t.speed) {
    const max = Math.max(1, ...t.speed.map((p) => p[1] || 0));
    line(t.speed, "#ffffff", (v) => v / max);
  }
}

// The team's best laps at this track (fleet.team: the laps bucket ranked by the fleet thread);
// hidden without a fleet (or with team_rows = 0).
function renderTeam(t) {
  const card = $("team-card");
  card.hidden = !t;
  if (!t) return;
  $("team-track").textContent = t.track ? `· ${t.track}` : "";
  const gap = (g) => (g > 0 ? `+${Number(g).toFixed(3)}` : "");
  let me = "";
  if (!t.track) me = "no track yet";
  else if (t.me) me = t.me.pos === 1 ? `${t.me.driver}: P1, the team's best` : `${t.me.driver}: P${t.me.pos} of ${t.drivers}, ${gap(t.me.gap_s)} to the best`;
  else me = `${t.driver}: no lap here yet`;
  if (t.last_error) me += ` · ${t.last_error}`;
  $("team-me").textContent = me;
  $("team").querySelector("tbody").replaceChildren(...(t.rows || []).map((r) => {
    const tr = el("tr", r.driver === (t.me && t.me.driver) ? "mine" : null);
    tr.append(el("td", null, String(r.pos)), el("td", null, r.driver), el("td", null, r.car || "–"),
      el("td", null, fmtLap(r.best_s)), el("td", null, gap(r.gap_s)));
    return tr;
  }));
}

function renderDisk(d) {
  const parts = [];
  if (d.free_bytes !== undefined) parts.push(`${fmtBytes(d.free_bytes)} free of ${fmtBytes(d.total_bytes)}`);
  if (d.write_rate_bps) parts.push(`writing ${fmtBytes(d.write_rate_bps)}/s`);
  if (d.time_left_s !== undefined && d.time_left_s !== null) parts.push(`${fmtDuration(d.time_left_s)} left at this rate`);
  if (d.error) parts.push(`error: ${d.error}`);
  $("disk").textContent = parts.join(" · ") || "–";
}

function renderSources(sources) {
  const body = $("sources").querySelector("tbody");
  body.replaceChildren(...Object.entries(sources).map(([name, s]) => {
    const tr = el("tr");
    const drops = Object.entries(s.dropped || {}).filter(([, n]) => n).map(([k, n]) => `${k} ${n}`).join(", ");
    const age = s.last_sample_age_s === null || s.last_sample_age_s === undefined ? "never" : `${Number(s.last_sample_age_s).toFixed(1)} s`;
    const stateCls = s.state === "receiving" ? "ok" : s.state === "listening" ? "idle" : "bad";
    const st = el("td"); st.append(el("span", "pill " + stateCls, s.state));
    tr.append(el("td", null, name), st, el("td", null, `${Number(s.rate_hz || 0).toFixed(0)}/s`), el("td", null, age), el("td", null, drops || "–"));
    return tr;
  }));
}

function renderEvents(events) {
  const list = $("events");
  const shown = events.slice(-8).reverse();
  list.replaceChildren(...shown.map((e) => {
    const when = new Date(e.wall_us / 1000).toLocaleTimeString();
    // The daemon words each event as its journal does (e.text); the page adds the time.
    const text = `${when} ${e.text || e.kind.replace("_", " ")}`;
    return el("li", e.kind === "marker" ? "marker" : e.warning ? "warning" : null, text);
  }));
}

async function mark() {
  const btn = $("mark");
  const msg = $("markmsg");
  btn.disabled = true;
  try {
    const r = await fetch("/api/mark", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Wrtfd-Csrf": csrf || "" },
      body: JSON.stringify({ note: $("note").value }),
    });
    const body = await r.json().catch(() => ({}));
    if (r.ok) {
      msg.textContent = `marked ${new Date(body.wall_us / 1000).toLocaleTimeString()}`;
      msg.className = "ok";
      $("note").value = "";
    } else {
      msg.textContent = body.error || `HTTP ${r.status}`;
      msg.className = "bad";
    }
  } catch (e) {
    msg.textContent = "daemon unreachable";
    msg.className = "bad";
  } finally {
    btn.disabled = !csrf;
  }
}

// Pressed while crossing the line: every GNSS source with lap timing lays it at its next fix.
async function startFinish(btn) {
  const msg = $("markmsg");
  btn.disabled = true;
  btn.dataset.busy = "1";
  try {
    const r = await fetch("/api/mark", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Wrtfd-Csrf": csrf || "" },
      body: JSON.stringify({ note: "start/finish", start_finish: true }),
    });
    const body = await r.json().catch(() => ({}));
    msg.textContent = r.ok ? `start/finish line asked of ${(body.start_finish || []).join(", ")}` : (body.error || `HTTP ${r.status}`);
    msg.className = r.ok ? "ok" : "bad";
  } catch (e) {
    msg.textContent = "daemon unreachable";
    msg.className = "bad";
  } finally {
    delete btn.dataset.busy;
    btn.disabled = !csrf;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("mark").addEventListener("click", mark);
  connect();
});
