// The page: what opens at first sight, pan and zoom, search (a node fused away finds its fused op), the legend.
const LAYER_MAX = 40;     // a scope of the opened GeOp with at most this many nodes opens with it (a model layer)
const BOXES = 150;        // ... and whole levels of its scopes open while it shows at most this many boxes
const READ_SCALE = 0.9;   // the opening zoom on a GeOp body: labels at 12 px x this, at least
const NARROW = 1000;      // below this window width the legend starts closed

// ---- first sight -------------------------------------------------------------------------------------------
// A graph with GeOps opens on the body of its largest GeOp (the model, not its variables and initializers):
// its scopes open level by level while they are few, its small scopes (the model's layers) open on their ops,
// at a readable zoom, on the top of the body (where the data comes in). Without GeOps: the largest groups open
// while the whole picture still fits.
function largestGeop() {
  let best = -1;
  for (const g of rootGroups) if (G[g].g >= 0 && (best < 0 || size[g] > size[best])) best = g;
  return best;
}
function firstSight() {
  const geop = largestGeop();
  if (geop >= 0) {
    open[geop] = 1;
    let level = [geop], boxes = kidGroups[geop].length + kidNodes[geop].length;
    for (;;) {           // whole levels of scopes open while the body stays under about BOXES boxes
      const next = [].concat(...level.map(g => kidGroups[g]));
      const more = next.reduce((sum, g) => sum + kidGroups[g].length + kidNodes[g].length - 1, 0);
      if (!next.length || boxes + more > BOXES) break;
      for (const g of next) open[g] = 1;
      boxes += more; level = next;
    }
    for (const k of kidGroups[geop]) if (size[k] <= LAYER_MAX) open[k] = 1;
    return geop;
  }
  const [roomW, roomH] = roomForPicture();
  const fits = ([w, h]) => w * 0.75 <= roomW && h * 0.75 <= roomH;
  const queue = rootGroups.slice();
  for (let tries = 0; queue.length && tries < 40; tries++) {
    queue.sort((a, b) => size[b] - size[a]);
    const g = queue.shift();
    open[g] = 1;
    if (fits(relayout())) { for (const k of kidGroups[g]) queue.push(k); } else open[g] = 0;
  }
  return -1;
}
function roomForPicture() { return [innerWidth - legendWidth() - 40, innerHeight - barHeight() - 40]; }
function legendWidth() { const l = document.getElementById("legend"); return l.classList.contains("closed") ? 0 : l.offsetWidth + 10; }
function focusOn(g) {     // the top of an open group's body, at a readable zoom, its first row centred
  const u = NN + g, [roomW] = roomForPicture(), rows = rowsOf.get(g) || [];
  S = Math.max(READ_SCALE, Math.min(1.1, roomW / UW[u]));
  let cxAt = UX[u] + UW[u] / 2;
  if (UW[u] * S > roomW && rows.length) { const first = rows[0]; cxAt = (UX[first[0]] + UX[first[first.length - 1]] + UW[first[first.length - 1]]) / 2; }
  TX = 20 + roomW / 2 - cxAt * S; TY = 16 - UY[u] * S; redraw();
}

// ---- interaction -----------------------------------------------------------------------------------------------
let bounds = [0, 0];
function fit() {
  const [roomW, roomH] = roomForPicture();
  S = Math.min(1.2, roomW / Math.max(1, bounds[0]), roomH / Math.max(1, bounds[1]));
  TX = 20 + (roomW - bounds[0] * S) / 2; TY = Math.max(20, (innerHeight - barHeight() - bounds[1] * S) / 2); redraw();
}
function rebuild(keep) {
  const before = keep >= 0 ? [UX[keep] * S + TX, UY[keep] * S + TY] : null;
  bounds = relayout();
  if (before && keep >= 0) { TX = before[0] - UX[keep] * S; TY = before[1] - UY[keep] * S; }
  document.getElementById("totals").textContent =
    `${N.length} nodes, ${E.length} edges, ${D.geops.length} GeOp(s) \u00b7 showing ${units.length} boxes, ${drawn.length} arrows`;
  document.body.dataset.layoutMs = String(Math.round(layoutMs));
  redraw();
}
function unitAt(px, py) {
  const x = (px - TX) / S, y = (py - barHeight() - TY) / S;
  for (const u of units) if (x >= UX[u] && x <= UX[u] + UW[u] && y >= UY[u] && y <= UY[u] + UH[u]) return u;
  for (let k = frames.length - 1; k >= 0; k--) {
    const f = frames[k];
    if (x >= UX[f] && x <= UX[f] + UW[f] && y >= UY[f] && y <= UY[f] + HEAD) return f;   // a frame's header
  }
  return -1;
}
function esc(s) { return String(s).replace(/[&<>]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;"}[c])); }
function timeText(n) { return "npu_us" in n ? (n.npu_us > 0 ? `${formatUs(n.npu_us)} per step on ${n.npu_unit || "?"}` : "not run in the step") : ""; }
function show(u) {
  sel = u; const box = document.getElementById("info");
  if (u < 0) { box.style.display = "none"; redraw(); return; }
  box.style.display = "block";
  if (u < NN) {
    const n = N[u], time = timeText(n);
    box.innerHTML = `<b>${esc(n.n)}</b><br>op ${esc(n.o)} \u00b7 list ${esc(n.l || "-")} \u00b7 ${esc(n.p || "-")}` +
      (n.g >= 0 ? ` \u00b7 in ${esc(D.geops[n.g])}` : "") + (n.d ? ` \u00b7 ${esc(n.d)}` : "") +
      (time ? `<br>estimated: ${esc(time)}` : "") + (n.r ? `<br>${esc(n.r)}` : "");
  } else {
    const g = u - NN, st = stats[g];
    box.innerHTML = `<b>${esc(G[g].n)}</b>${G[g].g >= 0 ? " (GeOp: runs on the device)" : ""}<br>${size[g]} nodes: ` +
      `${st.white} white, ${st.black} black, ${st.gray} gray, ${st[""]} unlisted \u00b7 ${st.device} device, ${st.host} host` +
      (HAS_TIME ? `<br>estimated: ${formatUs(groupUs[g])} per step in all` : "") + `<br><i>click to ${open[g] ? "close" : "open"}</i>`;
  }
  redraw();
}
function toggle(g) { open[g] = open[g] ? 0 : 1; if (!open[g]) closeBelow(g); rebuild(NN + g); }
function closeBelow(g) { for (const k of kidGroups[g]) { open[k] = 0; closeBelow(k); } }
function reveal(i) { let changed = false; for (const g of nchain[i]) if (!open[g]) { open[g] = 1; changed = true; } if (changed) rebuild(-1); }
function centre(u) { S = Math.max(S, 1); TX = innerWidth / 2 - (UX[u] + UW[u] / 2) * S; TY = (innerHeight - barHeight()) / 2 - (UY[u] + UH[u] / 2) * S; show(u); }
let drag = null;
cv.addEventListener("mousedown", e => { drag = {x: e.clientX, y: e.clientY, tx: TX, ty: TY, moved: false}; cv.style.cursor = "grabbing"; });
addEventListener("mouseup", e => {
  if (drag && !drag.moved) {
    const u = unitAt(e.clientX, e.clientY);
    if (u >= NN) { toggle(u - NN); show(u); } else show(u);
  }
  drag = null; cv.style.cursor = "grab";
});
addEventListener("mousemove", e => {
  if (drag) {
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    TX = drag.tx + dx; TY = drag.ty + dy; redraw(); return;
  }
  const u = unitAt(e.clientX, e.clientY), time = u >= 0 && u < NN ? timeText(N[u]) : "";
  document.getElementById("status").textContent = u < 0 ? "" : u < NN ? `${N[u].n} (${N[u].o})` + (time ? ` \u00b7 ${time}` : "")
    : `${G[u - NN].n} (${size[u - NN]} nodes)` + (HAS_TIME ? ` \u00b7 ${formatUs(groupUs[u - NN])} per step` : "");
});
cv.addEventListener("wheel", e => {
  e.preventDefault(); const f = Math.exp(-e.deltaY * 0.0015), px = e.clientX, py = e.clientY - barHeight();
  TX = px - (px - TX) * f; TY = py - (py - TY) * f; S *= f; redraw();
}, {passive: false});

// ---- search ---------------------------------------------------------------------------------------------------
const q = document.getElementById("search");
function rank(name, op, t) {     // exact names first, then the last part of a name, prefixes, substrings, op types
  name = name.toLowerCase();
  if (name === t) return 0;
  if (shortName(name) === t) return 1;
  if (name.startsWith(t)) return 2;
  if (name.includes(t)) return 3;
  op = op.toLowerCase();
  if (op === t) return 4;
  return op.includes(t) ? 5 : -1;
}
// A node a fusion removed is not drawn: its name finds the fused op that runs it (D.fused: name -> fused node).
const drawnIndex = new Map();
N.forEach((n, i) => { const k = drawnIndex.get(n.n); if (k === undefined || (N[k].g < 0 && n.g >= 0)) drawnIndex.set(n.n, i); });
const fusedAway = Object.entries(D.fused || {}).map(([name, into]) => [name, drawnIndex.get(into)]).filter(p => p[1] !== undefined);
let via = new Map();      // match -> the fused-away name it was found by
q.addEventListener("input", () => {
  const t = q.value.trim().toLowerCase(); matches = []; mi = -1; via = new Map();
  if (t) {
    const best = new Map();
    for (let i = 0; i < NN; i++) { const r = rank(N[i].n, N[i].o, t); if (r >= 0) best.set(i, r); }
    for (const [name, i] of fusedAway) {
      const r = rank(name, "", t);
      if (r >= 0 && !(best.get(i) <= r)) { best.set(i, r); via.set(i, name); }
    }
    matches = Array.from(best.keys()).sort((a, b) => best.get(a) - best.get(b) || a - b);
  }
  document.getElementById("count").textContent = t ? `${matches.length} found` + (matches.length ? ` (first: ${label(matches[0])})` : "") : "";
  redraw();
});
function label(i) { return via.has(i) ? `${N[i].n}, the fused ${N[i].o} that runs ${via.get(i)}` : N[i].n; }
function next() {
  if (!matches.length) return;
  mi = (mi + 1) % matches.length; reveal(matches[mi]); centre(matches[mi]);
  document.getElementById("count").textContent = `${mi + 1}/${matches.length}: ${label(matches[mi])}`;
}
q.addEventListener("keydown", e => { if (e.key === "Enter") next(); });
document.getElementById("fit").onclick = fit;
document.getElementById("expand").onclick = () => { open.fill(1); rebuild(-1); fit(); };
document.getElementById("collapse").onclick = () => { open.fill(0); rebuild(-1); fit(); };

// ---- boot ---------------------------------------------------------------------------------------------------------
const hash = name => decodeURIComponent((location.hash.match(new RegExp(`[#&]${name}=([^&]*)`)) || [])[1] || "");
buildLegend(innerWidth < NARROW);
if (hash("colour") === "time" && HAS_TIME) setColourMode("time");
resize();
const focus = hash("expand") === "all" ? (open.fill(1), -1) : firstSight();
rebuild(-1); addEventListener("resize", resize);
if (focus >= 0) focusOn(focus); else fit();
const hq = hash("q");   // page.html#q=name
if (hq) { q.value = hq; q.dispatchEvent(new Event("input")); if (matches.length) { mi = -1; next(); } }
requestAnimationFrame(() => {
  document.body.dataset.renderMs = String(Math.round(performance.now() - started));
  document.body.dataset.view = JSON.stringify(viewState());
});
