// The graph picture: name-scope groups that open and close, bundled edges, a layered layout of what is open.
(function () {
"use strict";
const started = performance.now();
const D = JSON.parse(document.getElementById("graph-data").textContent);
const N = D.nodes, G = D.groups, E = D.edges, NN = N.length;
const FILL = {white: "#ffffff", black: "#263238", gray: "#9e9e9e", "": "#b3e0f7"};
const BORDER = {device: "#1b9e3e", host: "#e67e00", "": "#78909c"};
const HALO = D.geops.map((g, i) => `hsl(${(290 + i * 137) % 360},70%,55%)`);
const INK = D.geops.map((g, i) => `hsl(${(290 + i * 137) % 360},75%,30%)`);
const TINT = D.geops.map((g, i) => `hsla(${(290 + i * 137) % 360},70%,55%,0.10)`);
const NODE_H = 34, GROUP_H = 44, PAD = 12, HEAD = 22, GAP_X = 46, GAP_Y = 10, MAX_COLUMN = 24, BAND_GAP = 56, ASPECT = 1.6, FOLD_AFTER = 1600;

// ---- the group tree -------------------------------------------------------------------------------------
const kidGroups = G.map(() => []), kidNodes = G.map(() => []), rootGroups = [], rootNodes = [];
G.forEach((g, i) => (g.p < 0 ? rootGroups : kidGroups[g.p]).push(i));
N.forEach((n, i) => (n.s < 0 ? rootNodes : kidNodes[n.s]).push(i));
const gchain = G.map(() => null);            // root-first ancestors of a group, itself last
function chainOf(g) { if (gchain[g]) return gchain[g]; const c = G[g].p < 0 ? [g] : chainOf(G[g].p).concat([g]); gchain[g] = c; return c; }
G.forEach((g, i) => chainOf(i));
const nchain = N.map(n => (n.s < 0 ? [] : gchain[n.s]));
const size = new Int32Array(G.length), stats = G.map(() => ({white: 0, black: 0, gray: 0, "": 0, device: 0, host: 0}));
N.forEach((n, i) => { for (const g of nchain[i]) { size[g]++; stats[g][n.l]++; if (n.p) stats[g][n.p]++; } });
const open = new Uint8Array(G.length);

// ---- text measures ---------------------------------------------------------------------------------------
const cv = document.getElementById("view"), cx = cv.getContext("2d");
const BOLD = "600 12px system-ui,sans-serif", SMALL = "11px system-ui,sans-serif";
const ruler = document.createElement("canvas").getContext("2d"), widthCache = new Map();
function textWidth(t, font) {      // measured on a canvas of its own, whose font the drawing never changes
  font = font || BOLD; const key = font + "\u0000" + t; let w = widthCache.get(key);
  if (w === undefined) { ruler.font = font; w = ruler.measureText(t).width; widthCache.set(key, w); }
  return w;
}
function shortName(n) { const k = n.lastIndexOf("/"); return k < 0 ? n : n.slice(k + 1); }
function clip(t, max) { return t.length > max ? t.slice(0, max - 1) + "\u2026" : t; }

// Units: node i is unit i, group g is unit NN + g.
const UX = new Float64Array(NN + G.length), UY = new Float64Array(NN + G.length);
const UW = new Float64Array(NN + G.length), UH = new Float64Array(NN + G.length);
function unitSize(u) {
  if (u < NN) { UW[u] = Math.max(96, Math.min(230, textWidth(clip(shortName(N[u].n), 32)) + 20)); UH[u] = NODE_H; return; }
  const g = u - NN;
  if (!open[g]) { UW[u] = Math.max(120, Math.min(250, textWidth("\u25b8 " + clip(G[g].k, 32)) + 28)); UH[u] = GROUP_H; }
}

// ---- layout ------------------------------------------------------------------------------------------------
let visible = new Int32Array(NN), drawn = [], frames = [], units = [];
function visibleUnit(i) { for (const g of nchain[i]) if (!open[g]) return NN + g; return i; }
function members(container) {
  const gs = container < 0 ? rootGroups : kidGroups[container], ns = container < 0 ? rootNodes : kidNodes[container];
  return gs.map(g => NN + g).concat(ns);
}
function relayout() {
  for (let i = 0; i < NN; i++) visible[i] = visibleUnit(i);
  const inner = new Map();                // container -> Map(key -> [a, b]) of edges between its members
  const bundles = new Map();              // visible a -> b: [a, b, count, data edges]
  for (const [a, b, ctl] of E) {
    const ca = nchain[a], cb = nchain[b];
    let j = 0;
    while (j < ca.length && j < cb.length && ca[j] === cb[j] && open[ca[j]]) j++;
    if (j < ca.length && j < cb.length && ca[j] === cb[j]) continue;   // both inside one closed group
    const container = j === 0 ? -1 : ca[j - 1];
    const ua = j < ca.length ? NN + ca[j] : a, ub = j < cb.length ? NN + cb[j] : b;
    let m = inner.get(container); if (!m) { m = new Map(); inner.set(container, m); }
    m.set(ua * 1e7 + ub, [ua, ub]);
    const va = visible[a], vb = visible[b], key = va * 1e7 + vb;
    const bundle = bundles.get(key);
    if (bundle) { bundle[2]++; bundle[3] += ctl ? 0 : 1; } else bundles.set(key, [va, vb, 1, ctl ? 0 : 1]);
  }
  frames = []; units = [];
  const [w, h] = layoutContainer(-1, inner);
  place(-1, 0, 0);
  drawn = Array.from(bundles.values());
  return [w, h];
}
const rel = new Map();                    // unit -> [x, y] inside its container
function layoutContainer(container, inner) {
  const us = members(container);
  for (const u of us) { if (u >= NN && open[u - NN]) { const [w, h] = layoutContainer(u - NN, inner); UW[u] = w; UH[u] = h; } else unitSize(u); }
  const index = new Map(us.map((u, k) => [u, k]));
  const preds = us.map(() => []), succs = us.map(() => []);
  for (const [a, b] of (inner.get(container) || new Map()).values()) {
    const ia = index.get(a), ib = index.get(b);
    if (ia !== undefined && ib !== undefined && ia !== ib) { preds[ib].push(ia); succs[ia].push(ib); }
  }
  const layer = layering(us.length, preds, succs);
  const columns = [];
  layer.forEach((l, k) => { (columns[l] = columns[l] || []).push(k); });
  const pos = new Float64Array(us.length);
  const cols = columns.filter(c => c);
  cols.forEach(c => c.forEach((k, r) => { pos[k] = r; }));
  for (let sweep = 0; sweep < 4; sweep++) {
    const list = sweep % 2 ? cols.slice().reverse() : cols, nb = sweep % 2 ? succs : preds;
    for (const c of list) {
      c.sort((p, q) => mean(nb[p], pos, pos[p]) - mean(nb[q], pos, pos[q]));
      c.forEach((k, r) => { pos[k] = r; });
    }
  }
  const columns2 = [];                    // [members, width, height]; a long layer wraps into several columns
  for (const c of cols) for (let s = 0; s < c.length; s += MAX_COLUMN) {
    const part = c.slice(s, s + MAX_COLUMN);
    let width = 0, height = 0;
    for (const k of part) { width = Math.max(width, UW[us[k]]); height += UH[us[k]] + GAP_Y; }
    columns2.push([part, width, height - GAP_Y]);
  }
  // A long chain of columns folds into bands stacked top to bottom, like lines of text, so that the
  // container keeps about the shape of a screen instead of one line thousands of pixels long.
  let total = 0, tallest = 0;
  for (const [, width, height] of columns2) { total += width + GAP_X; tallest = Math.max(tallest, height); }
  const long = total > FOLD_AFTER && total > ASPECT * 1.5 * (tallest + BAND_GAP);
  const band = long ? Math.max(Math.sqrt(ASPECT * total * (tallest + BAND_GAP)), FOLD_AFTER / 2) : Infinity;
  let x = 0, y = 0, width = 0;
  for (const [part, colw, colh] of columns2) {
    if (x > 0 && x + colw > band) { x = 0; y += tallest + BAND_GAP; }
    let top = y + (tallest - colh) / 2;
    for (const k of part) { rel.set(us[k], [x, top]); top += UH[us[k]] + GAP_Y; }
    x += colw + GAP_X; width = Math.max(width, x - GAP_X);
  }
  const height = columns2.length ? y + tallest : 0;
  const w = width, top = container < 0 ? 0 : HEAD;
  if (container < 0) return [w, height];
  for (const u of us) { const r = rel.get(u); r[0] += PAD; r[1] += top + PAD; }
  return [Math.max(w + 2 * PAD, textWidth(G[container].k) + 90), height + top + 2 * PAD];
}
function place(container, ox, oy) {
  for (const u of members(container)) {
    const [rx, ry] = rel.get(u);
    UX[u] = ox + rx; UY[u] = oy + ry;
    if (u >= NN && open[u - NN]) { frames.push(u); place(u - NN, UX[u], UY[u]); } else units.push(u);
  }
}
function mean(list, pos, fallback) { if (!list.length) return fallback; let s = 0; for (const k of list) s += pos[k]; return s / list.length; }
function layering(count, preds, succs) {
  // Longest-path layers over a topological order; a cycle is broken at its earliest member.
  const pending = preds.map(p => p.length), done = new Uint8Array(count), order = [], queue = [];
  for (let k = 0; k < count; k++) if (!pending[k]) queue.push(k);
  let cursor = 0, head = 0;
  while (order.length < count) {
    if (head >= queue.length) { while (done[cursor]) cursor++; queue.push(cursor); }
    const k = queue[head++]; if (done[k]) continue; done[k] = 1; order.push(k);
    for (const s of succs[k]) if (!done[s] && --pending[s] <= 0) queue.push(s);
  }
  const rank = new Int32Array(count); order.forEach((k, r) => { rank[k] = r; });
  const layer = new Int32Array(count);
  for (const k of order) for (const p of preds[k]) if (rank[p] < rank[k]) layer[k] = Math.max(layer[k], layer[p] + 1);
  for (let r = order.length - 1; r >= 0; r--) {   // sources move next to their first consumer
    const k = order[r];
    if (preds[k].some(p => rank[p] < rank[k])) continue;
    let first = Infinity; for (const s of succs[k]) if (rank[s] > rank[k]) first = Math.min(first, layer[s]);
    if (first !== Infinity) layer[k] = Math.max(0, first - 1);
  }
  return layer;
}

// ---- first sight: open the largest groups while the picture still fits the window with readable labels ----
const READABLE = 0.75;
function roomForPicture() { return [innerWidth - legendWidth() - 60, innerHeight - 100]; }
function legendWidth() { const l = document.getElementById("legend"); return l.classList.contains("hidden") ? 0 : l.offsetWidth + 10; }
function firstSight() {
  const [roomW, roomH] = roomForPicture();
  const fits = ([w, h]) => w * READABLE <= roomW && h * READABLE <= roomH;
  let tries = 0;
  const queue = rootGroups.slice();
  while (queue.length && tries < 40) {
    queue.sort((a, b) => size[b] - size[a]);
    const g = queue.shift();
    open[g] = 1; tries++;
    if (fits(relayout())) { for (const k of kidGroups[g]) queue.push(k); } else open[g] = 0;
  }
}

// ---- drawing -------------------------------------------------------------------------------------------------
let S = 1, TX = 0, TY = 0, matches = [], mi = -1, sel = -1, pending = false;
function resize() {
  const r = window.devicePixelRatio || 1;
  cv.width = innerWidth * r; cv.height = (innerHeight - 40) * r;
  cv.style.width = innerWidth + "px"; cv.style.height = (innerHeight - 40) + "px";
  cx.setTransform(r, 0, 0, r, 0, 0); redraw();
}
function redraw() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } }
function draw() {
  const w = innerWidth, h = innerHeight - 40;
  cx.setTransform(window.devicePixelRatio || 1, 0, 0, window.devicePixelRatio || 1, 0, 0);
  cx.clearRect(0, 0, w, h);
  const x0 = -TX / S, y0 = -TY / S, x1 = (w - TX) / S, y1 = (h - TY) / S;
  const seen = u => !(UX[u] > x1 || UY[u] > y1 || UX[u] + UW[u] < x0 || UY[u] + UH[u] < y0);
  cx.save(); cx.translate(TX, TY); cx.scale(S, S);
  const labels = S >= 0.5;
  for (const f of frames) {
    if (!seen(f)) continue;
    const g = f - NN, colour = G[g].g >= 0 ? HALO[G[g].g] : "#90a4ae";
    cx.fillStyle = G[g].g >= 0 ? TINT[G[g].g] : "rgba(255,255,255,0.45)";
    roundRect(UX[f], UY[f], UW[f], UH[f], 8); cx.fill();
    cx.lineWidth = (G[g].g >= 0 ? 2.5 : 1) / Math.min(1, S); cx.strokeStyle = colour; cx.stroke();
    if (labels) {
      cx.fillStyle = G[g].g >= 0 ? INK[G[g].g] : "#455a64"; cx.font = BOLD; cx.textBaseline = "middle";
      cx.fillText("\u25be " + clip(G[g].k, 60) + (G[g].g >= 0 ? "  GeOp" : "") + "  \u00b7 " + size[g] + " nodes", UX[f] + 8, UY[f] + 12);
    }
  }
  drawEdges(x0, y0, x1, y1);
  for (const u of units) {
    if (!seen(u)) continue;
    if (u < NN) drawNode(u, labels); else drawGroup(u, labels);
  }
  cx.lineWidth = 3 / Math.min(1, S); cx.strokeStyle = "#d50000";
  for (const i of matches) { const u = visible[i]; cx.strokeRect(UX[u] - 4, UY[u] - 4, UW[u] + 8, UH[u] + 8); }
  if (sel >= 0) { cx.strokeStyle = "#6200ea"; cx.strokeRect(UX[sel] - 6, UY[sel] - 6, UW[sel] + 12, UH[sel] + 12); }
  cx.restore();
}
function roundRect(x, y, w, h, r) {
  cx.beginPath(); cx.moveTo(x + r, y); cx.arcTo(x + w, y, x + w, y + h, r); cx.arcTo(x + w, y + h, x, y + h, r);
  cx.arcTo(x, y + h, x, y, r); cx.arcTo(x, y, x + w, y, r); cx.closePath();
}
function drawNode(u, labels) {
  const n = N[u];
  if (n.g >= 0) { cx.fillStyle = TINT[n.g]; cx.fillRect(UX[u] - 3, UY[u] - 3, UW[u] + 6, UH[u] + 6); }
  cx.fillStyle = FILL[n.l] || FILL[""]; roundRect(UX[u], UY[u], UW[u], UH[u], 4); cx.fill();
  cx.lineWidth = 2 / Math.min(1, S); cx.strokeStyle = BORDER[n.p] || BORDER[""]; cx.stroke();
  if (!labels) return;
  const dark = n.l === "black" || n.l === "gray";
  cx.textBaseline = "middle";
  cx.fillStyle = dark ? "#fff" : "#102027"; cx.font = BOLD;
  cx.fillText(fitText(shortName(n.n), UW[u] - 12), UX[u] + 7, UY[u] + 11);
  cx.fillStyle = dark ? "#eceff1" : "#546e7a"; cx.font = SMALL;
  cx.fillText(fitText(n.o, UW[u] - 12, SMALL), UX[u] + 7, UY[u] + 25);
}
function drawGroup(u, labels) {
  const g = u - NN, st = stats[g], geop = G[g].g;
  cx.fillStyle = geop >= 0 ? TINT[geop] : "#fafafa"; roundRect(UX[u], UY[u], UW[u], UH[u], 7); cx.fill();
  cx.lineWidth = (geop >= 0 ? 3 : 1.5) / Math.min(1, S);
  cx.strokeStyle = geop >= 0 ? HALO[geop] : st.host && st.device ? "#7e57c2" : st.host ? BORDER.host : st.device ? BORDER.device : BORDER[""];
  cx.stroke();
  // a strip with the shares of the white, black, gray and unlisted nodes inside
  let x = UX[u] + 6; const total = size[g] || 1, width = UW[u] - 12;
  for (const key of ["white", "gray", "black", ""]) {
    const part = width * st[key] / total; if (part <= 0) continue;
    cx.fillStyle = FILL[key]; cx.fillRect(x, UY[u] + UH[u] - 9, part, 5); x += part;
  }
  cx.strokeStyle = "#b0bec5"; cx.lineWidth = 0.5 / Math.min(1, S); cx.strokeRect(UX[u] + 6, UY[u] + UH[u] - 9, width, 5);
  if (!labels) return;
  cx.textBaseline = "middle"; cx.fillStyle = "#102027"; cx.font = BOLD;
  cx.fillText("\u25b8 " + fitText(G[g].k, UW[u] - 24), UX[u] + 7, UY[u] + 11);
  cx.fillStyle = "#546e7a"; cx.font = SMALL;
  cx.fillText(fitText((geop >= 0 ? "GeOp \u00b7 " : "") + size[g] + " nodes", UW[u] - 12, SMALL), UX[u] + 7, UY[u] + 25);
}
function fitText(t, width, font) {
  if (textWidth(t, font) <= width) return t;
  let lo = 1, hi = t.length;
  while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (textWidth(t.slice(0, mid) + "\u2026", font) <= width) lo = mid; else hi = mid - 1; }
  return t.slice(0, lo) + "\u2026";
}
function drawEdges(x0, y0, x1, y1) {
  const scale = 1 / Math.min(1, S);
  for (const [a, b, count, data] of drawn) {
    const sx = UX[a] + UW[a], sy = UY[a] + UH[a] / 2, tx = UX[b], ty = UY[b] + UH[b] / 2;
    if ((sx < x0 && tx < x0) || (sx > x1 && tx > x1) || (sy < y0 && ty < y0) || (sy > y1 && ty > y1)) continue;
    const widthPx = Math.min(7 * scale, (1 + Math.log2(count)) * scale, UH[b] * 0.2);
    // Edges that only pass through the view, and edges away from the selected box, step back.
    const ends = (sx >= x0 && sx <= x1 && sy >= y0 && sy <= y1) + (tx >= x0 && tx <= x1 && ty >= y0 && ty <= y1);
    const touched = sel < 0 || a === sel || b === sel;
    const alpha = (touched ? 1 : 0.35) * (ends ? 1 : 0.3);
    cx.lineWidth = widthPx * (sel >= 0 && touched ? 1.6 : 1);
    cx.strokeStyle = data ? `rgba(55,71,79,${0.55 * alpha})` : `rgba(120,144,156,${0.6 * alpha})`;
    cx.setLineDash(data ? [] : [5 * scale, 4 * scale]);
    const back = tx < sx + 10, bend = back ? Math.max(60, Math.abs(ty - sy) / 3) : Math.max(20, (tx - sx) / 2);
    const c1x = sx + bend, c2x = tx - bend, c1y = back ? sy - bend : sy, c2y = back ? ty - bend : ty;
    cx.beginPath(); cx.moveTo(sx, sy); cx.bezierCurveTo(c1x, c1y, c2x, c2y, tx - 7 * scale, ty); cx.stroke();
    cx.setLineDash([]);
    const head = Math.min(Math.max(7 * scale, widthPx * 2.2), UH[b] * 0.45);
    cx.fillStyle = data ? `rgba(38,50,56,${0.85 * alpha})` : `rgba(120,144,156,${0.85 * alpha})`;
    cx.beginPath(); cx.moveTo(tx, ty); cx.lineTo(tx - head, ty - head * 0.55); cx.lineTo(tx - head, ty + head * 0.55); cx.closePath(); cx.fill();
    if (count > 1 && S > 0.6) {
      cx.fillStyle = "#37474f"; cx.font = "10px system-ui,sans-serif"; cx.textBaseline = "bottom";
      cx.fillText(String(count), (sx + tx) / 2 + 2, (sy + ty) / 2 - (back ? bend * 0.75 : 0) - 2);
    }
  }
}

// ---- interaction -----------------------------------------------------------------------------------------------
let bounds = [0, 0];
function fit() {
  const [roomW, roomH] = roomForPicture();
  S = Math.min(1.2, roomW / Math.max(1, bounds[0]), roomH / Math.max(1, bounds[1]));
  TX = 30 + (roomW - bounds[0] * S) / 2; TY = Math.max(20, (innerHeight - 40 - bounds[1] * S) / 2); redraw();
}
function rebuild(keep) {
  const before = keep >= 0 ? [UX[keep] * S + TX, UY[keep] * S + TY] : null;
  bounds = relayout();
  if (before && keep >= 0) { TX = before[0] - UX[keep] * S; TY = before[1] - UY[keep] * S; }
  document.getElementById("totals").textContent =
    `${N.length} nodes, ${E.length} edges, ${D.geops.length} GeOp(s) \u00b7 showing ${units.length} boxes, ${drawn.length} arrows`;
  redraw();
}
function unitAt(px, py) {
  const x = (px - TX) / S, y = (py - 40 - TY) / S;
  for (const u of units) if (x >= UX[u] && x <= UX[u] + UW[u] && y >= UY[u] && y <= UY[u] + UH[u]) return u;
  for (let k = frames.length - 1; k >= 0; k--) {
    const f = frames[k];
    if (x >= UX[f] && x <= UX[f] + UW[f] && y >= UY[f] && y <= UY[f] + HEAD) return f;   // a frame's header
  }
  return -1;
}
function esc(s) { return String(s).replace(/[&<>]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;"}[c])); }
function show(u) {
  sel = u; const box = document.getElementById("info");
  if (u < 0) { box.style.display = "none"; redraw(); return; }
  box.style.display = "block";
  if (u < NN) {
    const n = N[u];
    box.innerHTML = `<b>${esc(n.n)}</b><br>op ${esc(n.o)} \u00b7 list ${esc(n.l || "-")} \u00b7 ${esc(n.p || "-")}` +
      (n.g >= 0 ? ` \u00b7 in ${esc(D.geops[n.g])}` : "") + (n.d ? ` \u00b7 ${esc(n.d)}` : "") + (n.r ? `<br>${esc(n.r)}` : "");
  } else {
    const g = u - NN, st = stats[g];
    box.innerHTML = `<b>${esc(G[g].n)}</b>${G[g].g >= 0 ? " (GeOp: runs on the device)" : ""}<br>${size[g]} nodes: ` +
      `${st.white} white, ${st.black} black, ${st.gray} gray, ${st[""]} unlisted \u00b7 ${st.device} device, ${st.host} host` +
      `<br><i>click to ${open[g] ? "close" : "open"}</i>`;
  }
  redraw();
}
function toggle(g) { open[g] = open[g] ? 0 : 1; if (!open[g]) closeBelow(g); rebuild(NN + g); }
function closeBelow(g) { for (const k of kidGroups[g]) { open[k] = 0; closeBelow(k); } }
function reveal(i) { let changed = false; for (const g of nchain[i]) if (!open[g]) { open[g] = 1; changed = true; } if (changed) rebuild(-1); }
function centre(u) { S = Math.max(S, 1); TX = innerWidth / 2 - (UX[u] + UW[u] / 2) * S; TY = (innerHeight - 40) / 2 - (UY[u] + UH[u] / 2) * S; show(u); }
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
  const u = unitAt(e.clientX, e.clientY);
  document.getElementById("status").textContent = u < 0 ? "" : u < NN ? `${N[u].n} (${N[u].o})` : `${G[u - NN].n} (${size[u - NN]} nodes)`;
});
cv.addEventListener("wheel", e => {
  e.preventDefault(); const f = Math.exp(-e.deltaY * 0.0015), px = e.clientX, py = e.clientY - 40;
  TX = px - (px - TX) * f; TY = py - (py - TY) * f; S *= f; redraw();
}, {passive: false});
const q = document.getElementById("search");
function rank(n, t) {     // exact names first, then the last part of a name, prefixes, substrings, op types
  const name = n.n.toLowerCase();
  if (name === t) return 0;
  if (shortName(name) === t) return 1;
  if (name.startsWith(t)) return 2;
  if (name.includes(t)) return 3;
  const op = n.o.toLowerCase();
  if (op === t) return 4;
  return op.includes(t) ? 5 : -1;
}
q.addEventListener("input", () => {
  const t = q.value.trim().toLowerCase(); matches = []; mi = -1;
  if (t) {
    const found = [];
    for (let i = 0; i < NN; i++) { const r = rank(N[i], t); if (r >= 0) found.push([r, i]); }
    found.sort((a, b) => a[0] - b[0] || a[1] - b[1]); matches = found.map(p => p[1]);
  }
  document.getElementById("count").textContent = t ? `${matches.length} found` + (matches.length ? ` (first: ${N[matches[0]].n})` : "") : "";
  redraw();
});
function next() {
  if (!matches.length) return;
  mi = (mi + 1) % matches.length; reveal(matches[mi]); centre(matches[mi]);
  document.getElementById("count").textContent = `${mi + 1}/${matches.length}: ${N[matches[mi]].n}`;
}
q.addEventListener("keydown", e => { if (e.key === "Enter") next(); });
document.getElementById("fit").onclick = fit;
document.getElementById("expand").onclick = () => { open.fill(1); rebuild(-1); fit(); };
document.getElementById("collapse").onclick = () => { open.fill(0); rebuild(-1); fit(); };
document.getElementById("legend-toggle").onclick = () => document.getElementById("legend").classList.toggle("hidden");

// ---- legend ------------------------------------------------------------------------------------------------------
const rows = [["<h4>fill: precision list</h4>"], ["white list (may run float16)", FILL.white, "#78909c"],
  ["black list (stays float32)", FILL.black, "#78909c"], ["gray list (follows its input)", FILL.gray, "#78909c"],
  ["no list (not a float compute op)", FILL[""], "#78909c"], ["<h4>border: where it runs</h4>"],
  ["device", "#fff", BORDER.device], ["host", "#fff", BORDER.host], ["a group with both", "#fff", "#7e57c2"],
  ["<h4>GeOps (device segments)</h4>"]];
D.geops.forEach((g, i) => rows.push([`${g}`, TINT[i], HALO[i]]));
let legend = "";
for (const [t, f, b] of rows) legend += f === undefined ? t : `<div><span class="sw" style="background:${f};border-color:${b}"></span>${esc(t)}</div>`;
legend += `<h4>reading it</h4><div>\u25b8 a closed name scope: click to open; \u25be an open one: click its title to close</div>` +
  `<div>an arrow bundles every edge between two boxes; its number says how many</div>` +
  `<div>wheel: zoom \u00b7 drag: pan \u00b7 click a node: details</div>`;
if (D.warnings && D.warnings.length) legend += "<h4>warnings</h4>" + D.warnings.map(t => `<div>${esc(t)}</div>`).join("");
document.getElementById("legend").innerHTML = legend;

firstSight(); rebuild(-1); addEventListener("resize", resize); resize(); fit();
const hq = decodeURIComponent((location.hash.match(/[#&]q=([^&]*)/) || [])[1] || "");   // page.html#q=name
if (hq) { q.value = hq; q.dispatchEvent(new Event("input")); if (matches.length) { mi = -1; next(); } }
requestAnimationFrame(() => { document.body.dataset.renderMs = String(Math.round(performance.now() - started)); });
})();
