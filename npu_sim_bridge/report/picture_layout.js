// The layout: the name-scope group tree, a layered top-to-bottom layout of what is open, edges routed around boxes.
const N = D.nodes, G = D.groups, E = D.edges, NN = N.length;
const NODE_H = 34, GROUP_H = 44, PAD = 14, HEAD = 24, GAP_X = 30, GAP_Y = 34, MAX_ROW = 10;

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
const BOLD = "600 12px system-ui,sans-serif", SMALL = "11px system-ui,sans-serif", LABEL_PX = 12;
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
// Each open container (the root, or an open group) is laid out on its own, its open groups first: members in
// layers from top to bottom (longest path), a layer wider than MAX_ROW wrapping into several rows. The rows
// are kept, so that an edge that spans rows is routed through the gaps between the boxes of each row it crosses.
let visible = new Int32Array(NN), drawn = [], frames = [], units = [];
const rel = new Map();                    // unit -> [x, y] inside its container
const rowsOf = new Map();                 // container -> [[units of a row], ...]
const rowOf = new Map();                  // unit -> its row's index in its container
const routes = new Map();                 // container edge ua * 1e7 + ub -> [[x, y], ...], made when first drawn
function visibleUnit(i) { for (const g of nchain[i]) if (!open[g]) return NN + g; return i; }
function members(container) {
  const gs = container < 0 ? rootGroups : kidGroups[container], ns = container < 0 ? rootNodes : kidNodes[container];
  return gs.map(g => NN + g).concat(ns);
}
function relayout() {
  const started = performance.now();
  for (let i = 0; i < NN; i++) visible[i] = visibleUnit(i);
  const inner = new Map();                // container -> Map(key -> [a, b]) of edges between its members
  const bundles = new Map();              // visible a -> b: [a, b, count, data edges, container a, container b]
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
    if (bundle) { bundle[2]++; bundle[3] += ctl ? 0 : 1; } else bundles.set(key, [va, vb, 1, ctl ? 0 : 1, ua, ub]);
  }
  frames = []; units = []; rowsOf.clear(); rowOf.clear(); routes.clear();
  const [w, h] = layoutContainer(-1, inner);
  place(-1, 0, 0);
  drawn = Array.from(bundles.values());
  layoutMs = performance.now() - started;
  return [w, h];
}
let layoutMs = 0;
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
  const layers = [];
  layer.forEach((l, k) => { (layers[l] = layers[l] || []).push(k); });
  const pos = new Float64Array(us.length);
  const ls = layers.filter(c => c);
  ls.forEach(c => c.forEach((k, r) => { pos[k] = r; }));
  for (let sweep = 0; sweep < 4; sweep++) {   // order each layer by its neighbours' mean position (barycentre)
    const list = sweep % 2 ? ls.slice().reverse() : ls, nb = sweep % 2 ? succs : preds;
    for (const c of list) {
      c.sort((p, q) => mean(nb[p], pos, pos[p]) - mean(nb[q], pos, pos[q]));
      c.forEach((k, r) => { pos[k] = r; });
    }
  }
  const rows = [];                        // [members, width, height]
  for (const c of ls) for (let s = 0; s < c.length; s += MAX_ROW) {
    const part = c.slice(s, s + MAX_ROW);
    let width = 0, height = 0;
    for (const k of part) { width += UW[us[k]] + GAP_X; height = Math.max(height, UH[us[k]]); }
    rows.push([part, width - GAP_X, height]);
  }
  let widest = 0;
  for (const [, width] of rows) widest = Math.max(widest, width);
  let y = 0;
  const kept = [];
  rows.forEach(([part, width, height], r) => {
    let x = (widest - width) / 2;
    for (const k of part) { rel.set(us[k], [x, y]); rowOf.set(us[k], r); x += UW[us[k]] + GAP_X; }   // tops aligned
    kept.push(part.map(k => us[k]));
    y += height + GAP_Y;
  });
  rowsOf.set(container, kept);
  const height = rows.length ? y - GAP_Y : 0;
  if (container < 0) return [widest, height];
  const inside = Math.max(widest + 2 * PAD, textWidth("\u25be " + clip(G[container].k, 60) + "  GeOp \u00b7 00000 nodes") + 30);
  for (const u of us) { const r = rel.get(u); r[0] += (inside - widest) / 2; r[1] += HEAD + PAD; }
  return [inside, height + HEAD + 2 * PAD];
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

// ---- edge routes -------------------------------------------------------------------------------------------
// The route of an edge between two members of one container: from the bottom of its source down to the top of
// its target, passing each row in between through the gap nearest to the straight line. An edge that goes up
// (a cycle) or stays in its row leaves by the side of the container's rows.
function containerOf(u) { return u < NN ? N[u].s : G[u - NN].p; }
function route(ua, ub) {
  const key = ua * 1e7 + ub; let found = routes.get(key);
  if (found) return found;
  const rows = rowsOf.get(containerOf(ua)) || [], ra = rowOf.get(ua), rb = rowOf.get(ub);
  const sx = UX[ua] + UW[ua] / 2, tx = UX[ub] + UW[ub] / 2;
  if (ra === undefined || rb === undefined || rb <= ra) {
    const side = sideOf(rows) + 24;
    found = [[UX[ua] + UW[ua], UY[ua] + UH[ua] / 2], [side, UY[ua] + UH[ua] / 2], [side, UY[ub] + UH[ub] / 2], [UX[ub] + UW[ub], UY[ub] + UH[ub] / 2]];
  } else {
    const sy = UY[ua] + UH[ua], ty = UY[ub];
    found = [[sx, sy]];
    for (let r = ra + 1; r < rb; r++) {
      const row = rows[r]; if (!row || !row.length) continue;
      let top = Infinity, bottom = -Infinity;
      for (const u of row) { top = Math.min(top, UY[u]); bottom = Math.max(bottom, UY[u] + UH[u]); }
      const want = sx + (tx - sx) * ((top + bottom) / 2 - sy) / Math.max(1, ty - sy), x = gapNear(row, want);
      found.push([x, top - GAP_Y / 3], [x, bottom + GAP_Y / 3]);
    }
    found.push([tx, ty]);
  }
  routes.set(key, found);
  return found;
}
function gapNear(row, x) {   // x itself when no box of the row covers it, else the nearer side of that box
  for (const u of row) if (x > UX[u] - GAP_X / 4 && x < UX[u] + UW[u] + GAP_X / 4) {
    return x - UX[u] < UX[u] + UW[u] - x ? UX[u] - GAP_X / 2 : UX[u] + UW[u] + GAP_X / 2;
  }
  return x;
}
function sideOf(rows) { let right = -Infinity; for (const row of rows) for (const u of row) right = Math.max(right, UX[u] + UW[u]); return right; }
