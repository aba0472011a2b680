// Drawing: frames of open groups, closed groups, nodes and routed edges, coloured by list or by estimated time.
const FILL = {white: "#ffffff", black: "#263238", gray: "#9e9e9e", "": "#b3e0f7"};
const BORDER = {device: "#1b9e3e", host: "#e67e00", "": "#78909c"};
const HALO = D.geops.map((g, i) => `hsl(${(290 + i * 137) % 360},70%,55%)`);
const INK = D.geops.map((g, i) => `hsl(${(290 + i * 137) % 360},75%,30%)`);
const TINT = D.geops.map((g, i) => `hsla(${(290 + i * 137) % 360},70%,55%,0.10)`);
const cv = document.getElementById("view"), cx = cv.getContext("2d");

// ---- colour by estimated time (offered when the rows carry npu_us) -----------------------------------------
const HAS_TIME = N.some(n => "npu_us" in n);
const groupUs = new Float64Array(G.length);
N.forEach((n, i) => { if (n.npu_us > 0) for (const g of nchain[i]) groupUs[g] += n.npu_us; });
let timeLow = Infinity, timeHigh = 0, groupLow = Infinity, groupHigh = 0;   // nodes and groups: a scale each
N.forEach(n => { if (n.npu_us > 0) { timeLow = Math.min(timeLow, n.npu_us); timeHigh = Math.max(timeHigh, n.npu_us); } });
groupUs.forEach(us => { if (us > 0) { groupLow = Math.min(groupLow, us); groupHigh = Math.max(groupHigh, us); } });
let colourMode = "lists";
function heat(us, group) {   // light yellow (fastest) to dark red (slowest), on a log scale; gray: not timed
  if (!(us > 0)) return "#eceff1";
  const low = group ? groupLow : timeLow, high = group ? groupHigh : timeHigh;
  const span = Math.log(high / low) || 1, t = Math.min(1, Math.max(0, Math.log(us / low) / span));
  return `hsl(${Math.round(55 - 55 * t)},${Math.round(85 + 10 * t)}%,${Math.round(88 - 50 * t)}%)`;
}
function formatUs(us) { return us >= 1000 ? (us / 1000).toFixed(2) + " ms" : us.toFixed(us >= 10 ? 0 : 1) + " \u00b5s"; }
function nodeFill(n) { return colourMode === "time" ? heat(n.npu_us) : FILL[n.l] || FILL[""]; }
function darkFill(n) { return colourMode === "time" ? n.npu_us > 0 && Math.log(n.npu_us / timeLow) / (Math.log(timeHigh / timeLow) || 1) > 0.6 : n.l === "black" || n.l === "gray"; }

// ---- drawing -------------------------------------------------------------------------------------------------
let S = 1, TX = 0, TY = 0, matches = [], mi = -1, sel = -1, pending = false;
function barHeight() { return document.getElementById("bar").offsetHeight; }
function resize() {
  const r = window.devicePixelRatio || 1, top = barHeight();
  cv.style.top = top + "px"; document.getElementById("legend").style.top = (top + 10) + "px";
  cv.width = innerWidth * r; cv.height = (innerHeight - top) * r;
  cv.style.width = innerWidth + "px"; cv.style.height = (innerHeight - top) + "px";
  cx.setTransform(r, 0, 0, r, 0, 0); redraw();
}
function redraw() { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } }
function draw() {
  const w = innerWidth, h = innerHeight - barHeight();
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
      const time = colourMode === "time" && groupUs[g] > 0 ? "  \u00b7 " + formatUs(groupUs[g]) : "";
      const title = "\u25be " + clip(G[g].k, 60) + (G[g].g >= 0 ? "  GeOp" : "") + "  \u00b7 " + size[g] + " nodes" + time;
      // the title stays in sight while the frame's left edge is off screen
      const at = Math.max(UX[f] + 8, Math.min(x0 + 8, UX[f] + UW[f] - textWidth(title) - 8));
      cx.fillText(title, at, UY[f] + 13);
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
  cx.fillStyle = nodeFill(n); roundRect(UX[u], UY[u], UW[u], UH[u], 4); cx.fill();
  cx.lineWidth = 2 / Math.min(1, S); cx.strokeStyle = BORDER[n.p] || BORDER[""]; cx.stroke();
  if (!labels) return;
  const dark = darkFill(n);
  cx.textBaseline = "middle";
  cx.fillStyle = dark ? "#fff" : "#102027"; cx.font = BOLD;
  cx.fillText(fitText(shortName(n.n), UW[u] - 12), UX[u] + 7, UY[u] + 11);
  cx.fillStyle = dark ? "#eceff1" : "#546e7a"; cx.font = SMALL;
  const second = colourMode === "time" && n.npu_us > 0 ? `${n.o} \u00b7 ${formatUs(n.npu_us)}` : n.o;
  cx.fillText(fitText(second, UW[u] - 12, SMALL), UX[u] + 7, UY[u] + 25);
}
function drawGroup(u, labels) {
  const g = u - NN, st = stats[g], geop = G[g].g;
  cx.fillStyle = colourMode === "time" ? heat(groupUs[g], true) : geop >= 0 ? TINT[geop] : "#fafafa";
  roundRect(UX[u], UY[u], UW[u], UH[u], 7); cx.fill();
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
  const time = colourMode === "time" && groupUs[g] > 0 ? " \u00b7 " + formatUs(groupUs[g]) : "";
  cx.fillText(fitText((geop >= 0 ? "GeOp \u00b7 " : "") + size[g] + " nodes" + time, UW[u] - 12, SMALL), UX[u] + 7, UY[u] + 25);
}
function fitText(t, width, font) {
  if (textWidth(t, font) <= width) return t;
  let lo = 1, hi = t.length;
  while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (textWidth(t.slice(0, mid) + "\u2026", font) <= width) lo = mid; else hi = mid - 1; }
  return t.slice(0, lo) + "\u2026";
}
function edgePoints(a, b, ua, ub) {
  // The route between the two members of their common container, extended into the boxes it joins.
  const path = route(ua, ub).slice();
  if (a !== ua) path.unshift([UX[a] + UW[a] / 2, UY[a] + UH[a]]);
  if (b !== ub) path.push([UX[b] + UW[b] / 2, UY[b]]);
  return path;
}
function drawEdges(x0, y0, x1, y1) {
  // An edge between two boxes of one container follows its route. One that joins boxes inside other boxes is
  // drawn as the route between those outer boxes (once for all such edges) and a short stub at each inner end,
  // whole only while one of its ends is selected: long lines into nested boxes would cross everything between.
  const scale = 1 / Math.min(1, S), shared = new Set();
  drawnPaths = [];
  for (const [a, b, count, data, ua, ub] of drawn) {
    const ax = UX[a] + UW[a] / 2, ay = UY[a] + UH[a], bx = UX[b] + UW[b] / 2, by = UY[b];
    const ex0 = Math.min(UX[ua], UX[ub], ax, bx) - 40, ex1 = Math.max(UX[ua] + UW[ua], UX[ub] + UW[ub], ax, bx) + 400;
    const ey0 = Math.min(UY[ua], UY[ub], ay, by), ey1 = Math.max(UY[ua] + UH[ua], UY[ub] + UH[ub], ay, by);
    if (ex1 < x0 || ex0 > x1 || ey1 < y0 || ey0 > y1) continue;
    const touched = sel >= 0 && (a === sel || b === sel), alpha = sel < 0 || touched ? 1 : 0.35;
    const widthPx = Math.min(6 * scale, (1 + Math.log2(count)) * scale) * (touched ? 1.6 : 1);
    const ink = data ? `rgba(55,71,79,${0.6 * alpha})` : `rgba(120,144,156,${0.6 * alpha})`;
    const tip = data ? `rgba(38,50,56,${0.85 * alpha})` : `rgba(120,144,156,${0.85 * alpha})`;
    if (touched || (a === ua && b === ub)) {
      const path = edgePoints(a, b, ua, ub); drawnPaths.push([path, a, b]); polyline(path, widthPx, ink, tip, data, scale); continue;
    }
    const key = ua * 1e7 + ub;
    if (!shared.has(key)) { shared.add(key); drawnPaths.push([route(ua, ub), ua, ub]); polyline(route(ua, ub), widthPx, ink, tip, data, scale); }
    if (a !== ua) polyline([[ax, ay], [ax, ay + 12]], widthPx, ink, null, data, scale);
    if (b !== ub) polyline([[bx, by - 18], [bx, by]], widthPx, ink, tip, data, scale);
  }
}
let drawnPaths = [];      // [points, from unit, to unit] of each line the last drawing made
function polyline(path, widthPx, ink, tip, data, scale) {   // rounded corners; an arrowhead at the end if tip
  const last = path[path.length - 1], prev = path[path.length - 2];
  const head = tip ? Math.min(Math.max(7 * scale, widthPx * 2.2), 14) : 0;
  const len = Math.hypot(last[0] - prev[0], last[1] - prev[1]) || 1, dx = (last[0] - prev[0]) / len, dy = (last[1] - prev[1]) / len;
  cx.lineWidth = widthPx; cx.strokeStyle = ink; cx.setLineDash(data ? [] : [5 * scale, 4 * scale]);
  cx.beginPath(); cx.moveTo(path[0][0], path[0][1]);
  for (let k = 1; k < path.length - 1; k++) {     // a curve through each bend, ending at the next midpoint
    const end = k === path.length - 2, mx = end ? last[0] - dx * head : (path[k][0] + path[k + 1][0]) / 2;
    const my = end ? last[1] - dy * head : (path[k][1] + path[k + 1][1]) / 2;
    cx.quadraticCurveTo(path[k][0], path[k][1], mx, my);
  }
  if (path.length === 2) cx.lineTo(last[0] - dx * head, last[1] - dy * head);
  cx.stroke(); cx.setLineDash([]);
  if (!tip) return;
  cx.fillStyle = tip; cx.beginPath(); cx.moveTo(last[0], last[1]);
  cx.lineTo(last[0] - dx * head - dy * head * 0.55, last[1] - dy * head + dx * head * 0.55);
  cx.lineTo(last[0] - dx * head + dy * head * 0.55, last[1] - dy * head - dx * head * 0.55); cx.closePath(); cx.fill();
}
