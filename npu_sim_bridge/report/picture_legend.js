// The legend (collapsible; closed at first on a narrow window), the colour modes, and the view's state for tests.
function legendRows() {
  if (colourMode === "time") {
    const byUnit = {};
    N.forEach(n => { if (n.npu_us > 0) byUnit[n.npu_unit || "?"] = (byUnit[n.npu_unit || "?"] || 0) + n.npu_us; });
    const steps = [0, 0.25, 0.5, 0.75, 1].map(t => heat(timeLow * Math.pow(timeHigh / timeLow, t)));
    return `<h4>fill: estimated time per step</h4>` +
      `<div class="scale" style="background:linear-gradient(to right,${steps.join(",")})"></div>` +
      `<div class="ends"><span>${formatUs(timeLow)}</span><span>${formatUs(timeHigh)}</span></div>` +
      `<div><span class="sw" style="background:${heat(0)};border-color:#78909c"></span>not run in the step (no estimate)</div>` +
      `<h4>time by unit</h4>` + Object.entries(byUnit).sort((a, b) => b[1] - a[1])
        .map(([unit, us]) => `<div>${esc(unit)}: ${formatUs(us)}</div>`).join("") +
      `<div>a closed group shows the sum of its nodes, on a scale of its own (${formatUs(groupLow)} to ` +
      `${formatUs(groupHigh)}); hover or click a node for its unit</div>`;
  }
  const rows = [["<h4>fill: precision list</h4>"], ["white list (may run float16)", FILL.white, "#78909c"],
    ["black list (stays float32)", FILL.black, "#78909c"], ["gray list (follows its input)", FILL.gray, "#78909c"],
    ["no list (not a float compute op)", FILL[""], "#78909c"]];
  let html = "";
  for (const [t, f, b] of rows) html += f === undefined ? t : `<div><span class="sw" style="background:${f};border-color:${b}"></span>${esc(t)}</div>`;
  return html;
}
function buildLegend(closed) {
  const box = document.getElementById("legend");
  if (closed) box.classList.add("closed");
  if (HAS_TIME) {
    const pick = document.createElement("select");
    pick.id = "colour"; pick.title = "what the fill shows"; pick.setAttribute("aria-label", "colour by");
    pick.innerHTML = `<option value="lists">colour: precision list</option><option value="time">colour: estimated time</option>`;
    pick.onchange = () => setColourMode(pick.value);
    document.getElementById("bar").insertBefore(pick, document.getElementById("fit"));
  }
  document.getElementById("legend-toggle").onclick = () => { box.classList.toggle("closed"); redraw(); };
  fillLegend();
}
function fillLegend() {
  let html = `<div class="head"><b>legend</b><button id="legend-close" title="close the legend">\u2715</button></div>` + legendRows();
  html += `<h4>border: where it runs</h4>`;
  for (const [t, b] of [["device", BORDER.device], ["host", BORDER.host], ["a group with both", "#7e57c2"]]) {
    html += `<div><span class="sw" style="background:#fff;border-color:${b}"></span>${esc(t)}</div>`;
  }
  if (D.geops.length) html += `<h4>GeOps (device segments)</h4>` +
    D.geops.map((g, i) => `<div><span class="sw" style="background:${TINT[i]};border-color:${HALO[i]}"></span>${esc(g)}</div>`).join("");
  html += `<h4>reading it</h4><div>\u25b8 a closed name scope: click to open; \u25be an open one: click its title to close</div>` +
    `<div>data flows top to bottom; an arrow bundles every edge between two boxes, its number says how many</div>` +
    `<div>wheel: zoom \u00b7 drag: pan \u00b7 click a node: details \u00b7 search finds a node fused away by its fused op</div>`;
  if (D.warnings && D.warnings.length) html += "<h4>warnings</h4>" + D.warnings.map(t => `<div>${esc(t)}</div>`).join("");
  const box = document.getElementById("legend");
  box.innerHTML = html;
  document.getElementById("legend-close").onclick = () => { box.classList.add("closed"); redraw(); };
}
function setColourMode(mode) {
  colourMode = mode;
  const pick = document.getElementById("colour"); if (pick) pick.value = mode;
  fillLegend(); redraw();
}

// What a person sees, for the browser tests: the zoom, label size, boxes fully on screen (by op type), the legend.
function viewState() {
  const top = barHeight(), right = innerWidth - legendWidth(), bottom = innerHeight - top;
  const ops = {}; let nodes = 0, groups = 0, inGeop = 0;
  for (const u of units) {
    const sx = UX[u] * S + TX, sy = UY[u] * S + TY;
    if (sx < 0 || sy < 0 || sx + UW[u] * S > right || sy + UH[u] * S > bottom) continue;
    if (u >= NN) { groups++; continue; }
    nodes++; ops[N[u].o] = (ops[N[u].o] || 0) + 1; if (N[u].g >= 0) inGeop++;
  }
  const legend = document.getElementById("legend"), bar = document.getElementById("bar");
  return {scale: S, labelPx: LABEL_PX * S, nodes, groups, inGeop, ops, focus: focus >= 0 ? G[focus].n : null,
          focusSize: focus >= 0 ? [Math.round(UW[NN + focus]), Math.round(UH[NN + focus])] : null,
          width: innerWidth, barPx: top, barClipped: bar.scrollWidth > bar.clientWidth,
          legendOpen: !legend.classList.contains("closed"), legendPx: legendWidth(),
          legendClipped: legend.scrollWidth > legend.clientWidth, colour: colourMode,
          modes: HAS_TIME ? ["lists", "time"] : ["lists"], layoutMs: Math.round(layoutMs), ...crossings()};
}
// How many of the lines on screen pass through a box other than the two they join (sampled every 6 px).
function crossings() {
  const cell = 256, grid = new Map(), right = innerWidth - legendWidth(), bottom = innerHeight - barHeight();
  const x0 = -TX / S, y0 = -TY / S, x1 = (right - TX) / S, y1 = (bottom - TY) / S;
  for (const u of units) {
    if (UX[u] > x1 || UY[u] > y1 || UX[u] + UW[u] < x0 || UY[u] + UH[u] < y0) continue;
    for (let gx = Math.floor(UX[u] / cell); gx <= Math.floor((UX[u] + UW[u]) / cell); gx++)
      for (let gy = Math.floor(UY[u] / cell); gy <= Math.floor((UY[u] + UH[u]) / cell); gy++) {
        const key = gx * 100003 + gy; (grid.get(key) || grid.set(key, []).get(key)).push(u);
      }
  }
  let lines = 0, crossing = 0;
  for (const [path, a, b] of drawnPaths) {
    let seen = false, hit = false;
    for (let k = 1; k < path.length && !hit; k++) {
      const [px, py] = path[k - 1], [qx, qy] = path[k], steps = Math.ceil(Math.hypot(qx - px, qy - py) / 6);
      for (let t = 0; t <= steps && !hit; t++) {
        const x = px + (qx - px) * t / steps, y = py + (qy - py) * t / steps;
        if (x < x0 || x > x1 || y < y0 || y > y1) continue;
        seen = true;
        for (const u of grid.get(Math.floor(x / cell) * 100003 + Math.floor(y / cell)) || []) {
          if (u !== a && u !== b && x > UX[u] + 2 && x < UX[u] + UW[u] - 2 && y > UY[u] + 2 && y < UY[u] + UH[u] - 2) { hit = true; break; }
        }
      }
    }
    lines += seen; crossing += hit;
  }
  return {lines, crossing};
}
