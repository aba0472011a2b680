"""The standalone HTML picture of a rewritten graph: a canvas with zoom, pan, search and node details (no network).

The layout comes from layout.py (computed in Python); the page's plain JavaScript only draws it, so a
graph of thousands of nodes opens at once. Fill: list colour (white, black, gray; light blue for ops
with no list). Border: device (green) or host (orange). Halo: the GeOp segment the node runs in.
"""

from __future__ import annotations

import html
import json

_TEMPLATE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>NpuOptimizer graph __TITLE__</title>
<style>
html,body{margin:0;height:100%;overflow:hidden;font:13px/1.35 system-ui,-apple-system,Segoe UI,sans-serif;background:#b8c3ca}
#bar{position:absolute;left:0;right:0;top:0;height:40px;display:flex;gap:12px;align-items:center;padding:0 12px;
 background:#263238;color:#eceff1;z-index:2;box-sizing:border-box}
#bar b{font-size:14px}#bar input{width:260px;padding:4px 6px;border-radius:4px;border:0}
#bar button{padding:4px 10px;border-radius:4px;border:0;background:#546e7a;color:#fff;cursor:pointer}
#count{color:#b0bec5}
#legend{position:absolute;right:10px;top:50px;background:rgba(255,255,255,.94);border:1px solid #ccd;border-radius:6px;
 padding:8px 10px;z-index:2;max-width:260px}
#legend div{display:flex;align-items:center;gap:6px;margin:2px 0}
.sw{display:inline-block;width:18px;height:11px;border:2px solid #666;border-radius:2px}
#info{position:absolute;left:10px;bottom:10px;max-width:560px;background:rgba(255,255,255,.96);border:1px solid #ccd;
 border-radius:6px;padding:8px 10px;z-index:2;display:none;word-break:break-all}
#status{position:absolute;left:10px;top:48px;color:#263238;z-index:2;background:rgba(244,245,247,.85);padding:2px 4px}
canvas{position:absolute;left:0;top:40px;cursor:grab}
</style></head><body>
<div id="bar"><b>__TITLE__</b><span id="totals"></span>
<input id="search" placeholder="search a node name or op type (Enter: next)"><span id="count"></span>
<button id="fit">fit</button></div>
<div id="legend"></div><div id="status"></div><div id="info"></div>
<canvas id="view"></canvas>
<script id="graph-data" type="application/json">__DATA__</script>
<script>
(function(){
"use strict";
const D=JSON.parse(document.getElementById("graph-data").textContent);
const N=D.nodes, E=D.edges, W=62, H=16;
const FILL={white:"#ffffff",black:"#212121",gray:"#8a8a8a","":"#9fd3f5"};
const BORDER={device:"#1b9e3e",host:"#e67e00","":"#78909c"};
const halo=D.geops.map((g,i)=>`hsla(${(300+i*137)%360},80%,60%,0.45)`);
for(const n of N){n.X=n.x;n.Y=n.y;}
const cv=document.getElementById("view"),cx=cv.getContext("2d");
let S=1,TX=0,TY=0,matches=[],mi=-1,sel=-1;
function size(){const r=window.devicePixelRatio||1;cv.width=innerWidth*r;cv.height=(innerHeight-40)*r;
 cv.style.width=innerWidth+"px";cv.style.height=(innerHeight-40)+"px";cx.setTransform(r,0,0,r,0,0);draw();}
function fit(){if(!N.length)return;let a=1e18,b=1e18,c=-1e18,d=-1e18;
 for(const n of N){a=Math.min(a,n.X);b=Math.min(b,n.Y);c=Math.max(c,n.X+W);d=Math.max(d,n.Y+H);}
 const w=innerWidth,h=innerHeight-40;S=Math.min(w/(c-a+40),h/(d-b+40));TX=(w-(c-a)*S)/2-a*S;TY=(h-(d-b)*S)/2-b*S;draw();}
function draw(){const w=innerWidth,h=innerHeight-40;cx.clearRect(0,0,w,h);
 const x0=-TX/S-W,y0=-TY/S-H,x1=(w-TX)/S+W,y1=(h-TY)/S+H;
 cx.save();cx.translate(TX,TY);cx.scale(S,S);
 cx.lineWidth=0.8/S;const ea=Math.min(0.35,0.04+0.3*S)*Math.min(1,Math.sqrt(8000/Math.max(E.length,1)));
 for(const ctl of [0,1]){cx.beginPath();cx.strokeStyle=ctl?`rgba(69,90,100,${ea/2})`:`rgba(38,50,56,${ea})`;
  for(const e of E){if(e[2]!==ctl)continue;const a=N[e[0]],b=N[e[1]];
   if((a.X<x0&&b.X<x0)||(a.X>x1&&b.X>x1)||(a.Y<y0&&b.Y<y0)||(a.Y>y1&&b.Y>y1))continue;
   cx.moveTo(a.X+W,a.Y+H/2);cx.lineTo(b.X,b.Y+H/2);}cx.stroke();}
 for(const n of N){if(n.g<0||n.X<x0||n.X>x1||n.Y<y0||n.Y>y1)continue;cx.fillStyle=halo[n.g];cx.fillRect(n.X-10,n.Y-5,W+20,H+10);}
 const labels=S*H>=10;cx.lineWidth=Math.min(1.6,Math.max(0.4,W*S*0.08))/S;cx.font="10px system-ui,sans-serif";cx.textBaseline="middle";
 for(let i=0;i<N.length;i++){const n=N[i];if(n.X<x0||n.X>x1||n.Y<y0||n.Y>y1)continue;
  cx.fillStyle=FILL[n.l]||FILL[""];cx.strokeStyle=BORDER[n.p]||BORDER[""];cx.fillRect(n.X,n.Y,W,H);cx.strokeRect(n.X,n.Y,W,H);
  if(labels){cx.fillStyle=n.l==="black"?"#fff":"#111";cx.fillText(n.o.length>11?n.o.slice(0,10)+"\u2026":n.o,n.X+3,n.Y+H/2);}}
 cx.lineWidth=Math.max(3/S,2);cx.strokeStyle="#d50000";
 for(const i of matches){const n=N[i];cx.strokeRect(n.X-3,n.Y-3,W+6,H+6);}
 if(sel>=0){const n=N[sel];cx.strokeStyle="#6200ea";cx.strokeRect(n.X-5,n.Y-5,W+10,H+10);}
 cx.restore();}
function at(px,py){const x=(px-TX)/S,y=(py-40-TY)/S;for(let i=0;i<N.length;i++){const n=N[i];
 if(x>=n.X&&x<=n.X+W&&y>=n.Y&&y<=n.Y+H)return i;}return -1;}
function esc(s){return String(s).replace(/[&<>]/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;"}[c]));}
function show(i){sel=i;const box=document.getElementById("info");if(i<0){box.style.display="none";draw();return;}
 const n=N[i];box.style.display="block";
 box.innerHTML=`<b>${esc(n.n)}</b><br>op ${esc(n.o)} \u00b7 list ${esc(n.l||"-")} \u00b7 ${esc(n.p||"-")}`+
 (n.g>=0?` \u00b7 ${esc(D.geops[n.g])}`:"")+(n.d?` \u00b7 ${esc(n.d)}`:"")+(n.r?`<br>${esc(n.r)}`:"");draw();}
function centre(i){const n=N[i];S=Math.max(S,1.4);TX=innerWidth/2-(n.X+W/2)*S;TY=(innerHeight-40)/2-(n.Y+H/2)*S;show(i);}
let drag=null;
cv.addEventListener("mousedown",e=>{drag={x:e.clientX,y:e.clientY,tx:TX,ty:TY,moved:false};cv.style.cursor="grabbing";});
addEventListener("mouseup",e=>{if(drag&&!drag.moved)show(at(e.clientX,e.clientY));drag=null;cv.style.cursor="grab";});
addEventListener("mousemove",e=>{if(drag){const dx=e.clientX-drag.x,dy=e.clientY-drag.y;if(Math.abs(dx)+Math.abs(dy)>3)drag.moved=true;
 TX=drag.tx+dx;TY=drag.ty+dy;draw();return;}const i=at(e.clientX,e.clientY);
 document.getElementById("status").textContent=i>=0?N[i].n+" ("+N[i].o+")":"";});
cv.addEventListener("wheel",e=>{e.preventDefault();const f=Math.exp(-e.deltaY*0.0015),px=e.clientX,py=e.clientY-40;
 TX=px-(px-TX)*f;TY=py-(py-TY)*f;S*=f;draw();},{passive:false});
const q=document.getElementById("search");
q.addEventListener("input",()=>{const t=q.value.trim().toLowerCase();matches=[];mi=-1;
 if(t)for(let i=0;i<N.length;i++){if(N[i].n.toLowerCase().includes(t)||N[i].o.toLowerCase().includes(t))matches.push(i);}
 document.getElementById("count").textContent=t?matches.length+" found":"";draw();});
q.addEventListener("keydown",e=>{if(e.key==="Enter"&&matches.length){mi=(mi+1)%matches.length;centre(matches[mi]);
 document.getElementById("count").textContent=(mi+1)+"/"+matches.length;}});
document.getElementById("fit").onclick=fit;
const T=D.totals;document.getElementById("totals").textContent=`${T.nodes} nodes, ${T.edges} edges, ${D.geops.length} GeOp(s)`;
const lg=[["white list (may run float16)","#fff","#78909c"],["black list (stays float32)","#212121","#78909c"],
 ["gray list (follows its input)","#8a8a8a","#78909c"],["no list (not a float compute op)","#9fd3f5","#78909c"],
 ["runs on the device","#fff","#1b9e3e"],["stays on the host","#fff","#e67e00"]];
let h="";for(const [t,f,b] of lg)h+=`<div><span class="sw" style="background:${f};border-color:${b}"></span>${t}</div>`;
D.geops.forEach((g,i)=>{h+=`<div><span class="sw" style="background:${halo[i]};border-color:transparent"></span>segment ${esc(g)}</div>`;});
h+=`<div style="color:#607d8b">wheel: zoom \u00b7 drag: pan \u00b7 click: details</div>`;
document.getElementById("legend").innerHTML=h;
addEventListener("resize",size);size();fit();
const hq=decodeURIComponent((location.hash.match(/[#&]q=([^&]*)/)||[])[1]||"");  // page.html#q=name: find it
if(hq){q.value=hq;q.dispatchEvent(new Event("input"));if(matches.length){mi=0;centre(matches[0]);}}
})();
</script></body></html>
"""


def render_html(data: dict) -> str:
    """The page for picture_data() output."""
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return _TEMPLATE.replace("__TITLE__", html.escape(str(data.get("graph", "graph")))).replace("__DATA__", payload)
