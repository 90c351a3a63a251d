"""A self-contained HTML profile to explore: one file, no network, drawn by the browser.

The page holds the schedule as compact JSON columns and a small script that draws it on a canvas:
a timeline with one lane per engine (the DMA transfers in one lane that expands into its queues),
zoomed with the wheel or the buttons and panned by dragging, with the whole kernel on the axis at
first; hovering an instruction shows its op, engine, operands, start, duration and kernel file:line.
Below it: SBUF and PSUM occupancy over the same time range, the time per kernel source line, and a
table of the instructions that sorts (click a header) and filters (type in the box). One colour per
instruction kind everywhere on the page.
"""
from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from trnsim.report.schedule import Schedule
from trnsim.report.summary import format_time, headline, meta_rows, summary_dict

# Colours for the instruction kinds with the most time, then grey for the rest ("other").
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#86bcb6", "#d37295", "#a0cbe8")
OTHER = "#9d9d9d"


def op_colours(schedule: Schedule) -> dict[str, str]:
    """Instruction name -> colour, busiest kinds first; the same on every chart of the page."""
    time: dict[str, float] = {}
    for s in schedule.spans:
        time[s.name] = time.get(s.name, 0.0) + s.duration
    ranked = sorted(time, key=lambda k: (-time[k], k))
    return {k: PALETTE[i] if i < len(PALETTE) else OTHER for i, k in enumerate(ranked)}


def hotspots_of(schedule: Schedule) -> list[dict]:
    """Engine time per kernel source line (the spans' `source` arg), most first, with the line's main op."""
    by: dict[str, dict] = {}
    for s in schedule.spans:
        src = str(s.args.get("source") or "?")
        h = by.setdefault(src, {"source": src, "ns": 0.0, "count": 0, "ops": {}})
        h["ns"] += s.duration
        h["count"] += 1
        h["ops"][s.name] = h["ops"].get(s.name, 0.0) + s.duration
    out = sorted(by.values(), key=lambda h: -h["ns"])
    for h in out:
        h["op"] = max(h.pop("ops").items(), key=lambda kv: kv[1])[0]
    return out


def _table(header: list[str], rows: list[list[str]], numeric_from: int = 1, attrs: str = "") -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td{" class=n" if j >= numeric_from else ""}>{esc(c)}</td>'
                                    for j, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _data(schedule: Schedule, colours: dict[str, str], dma_pieces, occupancy) -> dict:
    """The page's JSON: span columns (times in ns from the kernel's start), string tables, DMA pieces, occupancy."""
    t0 = schedule.begin
    ops, locs, operands = {}, {}, {}
    tracks = list(schedule.tracks)
    tpos = {t: i for i, t in enumerate(tracks)}
    cols = {k: [] for k in "sdkolxi"}
    index_of = {}
    for n, s in enumerate(schedule.spans):
        index_of[s.id] = n
        cols["s"].append(round(s.start - t0, 2))
        cols["d"].append(round(s.duration, 2))
        cols["k"].append(tpos[s.track])
        cols["o"].append(ops.setdefault(s.name, len(ops)))
        cols["l"].append(locs.setdefault(str(s.args.get("source") or "?"), len(locs)))
        cols["x"].append(operands.setdefault(str(s.args.get("operands", "")), len(operands)))
        cols["i"].append(int(s.args.get("instruction", s.id)))
    data = {"kernel": schedule.kernel, "target": schedule.target, "latency": schedule.latency, "tracks": tracks,
            "ops": list(ops), "colours": [colours.get(o, OTHER) for o in ops], "locs": list(locs),
            "operands": list(operands), **cols, "pq": [], "ps": [], "pd": [], "pi": [], "occ": {}}
    if dma_pieces is not None and len(dma_pieces["queue"]):
        data["pq"] = np.asarray(dma_pieces["queue"]).astype(int).tolist()
        start = np.asarray(dma_pieces["start"], float)
        data["ps"] = np.round(start - t0, 2).tolist()
        data["pd"] = np.round(np.asarray(dma_pieces["end"], float) - start, 2).tolist()
        data["pi"] = [index_of.get(int(i), -1) for i in dma_pieces["span"]]
    for name, (times, nbytes, capacity, *allocated) in (occupancy or {}).items():
        data["occ"][name] = {"t": np.round(np.asarray(times, float) - t0, 3).tolist(),
                             "b": np.asarray(nbytes).astype(int).tolist(), "cap": int(capacity),
                             "alloc": int(allocated[0]) if allocated else None}
    return data


def render_html(schedule: Schedule, path: str | Path, trace_path: str | Path | None = None, *,
                dma_pieces: Mapping[str, Sequence] | None = None,
                occupancy: Mapping[str, tuple] | None = None, hotspots: list[dict] | None = None,
                note: str = "") -> Path:
    """Write the profile page to `path`.

    dma_pieces: each DMA transfer's share per queue ({"queue", "start", "end", "span"}: the span id it
    belongs to), drawn when the DMA lane is expanded. occupancy: {"SBUF": (times, bytes, capacity), ...}
    step functions. hotspots: time per source line (computed from the spans when not given).
    `trace_path` names the Perfetto trace the page points to.
    """
    esc = html.escape
    d = summary_dict(schedule)
    colours = op_colours(schedule)
    hot = hotspots if hotspots is not None else hotspots_of(schedule)
    total = sum(h["ns"] for h in hot) or 1.0
    hot_rows = "".join(
        f"<tr><td><code>{esc(h['source'])}</code></td><td class=n>{esc(format_time(h['ns']))}</td>"
        f"<td class=n>{100 * h['ns'] / total:.1f} %</td><td class=n>{h['count']:,}</td>"
        f"<td><span class=sw style='background:{colours.get(h['op'], OTHER)}'></span>{esc(h['op'])}</td>"
        f"<td><div class=bar style='width:{200 * h['ns'] / (hot[0]['ns'] or 1):.0f}px;"
        f"background:{colours.get(h['op'], OTHER)}'></div></td></tr>" for h in hot[:40])
    tracks = _table(["track", "spans", "active", "share"],
                    [[t["track"], f"{t['spans']:,}", format_time(t["busy_ns"]), f"{100 * t['utilisation']:.1f} %"]
                     for t in d["tracks"]])
    path_rows = [[t, format_time(ns)] for t, ns in sorted(d["critical_path"]["by_track"].items(),
                                                           key=lambda kv: -kv[1])]
    meta = meta_rows(d["meta"])
    legend = "".join(f"<span class=lg><span class=sw style='background:{c}'></span>{esc(k)}</span>"
                     for k, c in list(colours.items())[:len(PALETTE)])
    if len(colours) > len(PALETTE):
        legend += f"<span class=lg><span class=sw style='background:{OTHER}'></span>other</span>"
    trace = f"<code>{esc(Path(trace_path).name)}</code>" if trace_path else "the trace file"
    data = _json_parts(_data(schedule, colours, dma_pieces, occupancy))
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(schedule.kernel)}: trnsim profile"
        f"</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(schedule.kernel)} <small>on {esc(schedule.target)}</small></h1>",
        "".join(f"<p>{esc(line)}</p>" for line in headline(d)),
        f"<p class=note>{esc(note)}</p>" if note else "",
        "<h2>Timeline</h2><div id=controls><button id=zin title='zoom in'>+</button>"
        "<button id=zout title='zoom out'>&minus;</button><button id=reset>whole kernel</button> "
        "<span id=range></span> <span class=hint>wheel: zoom, drag: pan, click the DMA label: "
        "expand its queues</span></div>",
        "<div id=wrap><canvas id=tl></canvas><div id=tip></div></div>",
        f"<div id=legend>{legend}</div>",
        "<h2>SBUF and PSUM occupancy</h2><canvas id=occ></canvas>",
        "<h2>Time per source line</h2><table id=hot><thead><tr><th>source</th><th>engine time</th><th>share</th>"
        f"<th>instructions</th><th>main op</th><th></th></tr></thead><tbody>{hot_rows}</tbody></table>",
        "<h2>Instructions</h2><input id=filter size=50 placeholder='filter: op, engine, source or operand'> "
        "<span id=count></span><table id=ins><thead><tr><th data-k=i>#</th><th data-k=o>op</th>"
        "<th data-k=k>engine</th><th data-k=s>start</th><th data-k=d>duration</th><th data-k=l>source</th>"
        "<th>operands</th></tr></thead><tbody></tbody></table>",
        "<h2>Engines and DMA queues</h2>", tracks,
        "<h2>Critical path by track</h2>", _table(["track", "time on path"], path_rows),
        ("<h2>Kernel figures</h2>" + _table(["figure", "value"], [list(r) for r in meta])) if meta else "",
        f"<p>The same instructions with their dependency arrows are in {trace}: open it at "
        "<a href='https://ui.perfetto.dev'>ui.perfetto.dev</a> (<i>Open trace file</i>); "
        "the file stays on your machine.</p>",
        "<script type='application/json' id=data>", *data, "</script>",
        f"<script>{_JS}</script></body></html>",
    ]
    path = Path(path)
    with path.open("w", encoding="utf-8") as f:  # part by part: the data part of a large kernel is tens of MB
        for part in parts:
            f.write(part)
    return path


def _json_parts(data: dict):
    """The data object as JSON, one key at a time (a large kernel's columns are tens of MB); "<" escaped so
    that no string in it can end the script element."""
    yield "{"
    for n, k in enumerate(list(data)):
        v = data.pop(k)  # freed once written
        yield ("," if n else "") + json.dumps(k) + ":" + json.dumps(v, separators=(",", ":")).replace("<", "\\u003c")
    yield "}"


_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.6em 0}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}code{background:#f4f4f4}
#wrap{position:relative}#tl{width:100%;display:block;border:1px solid #ccc;cursor:crosshair}
#occ{width:100%;height:170px;display:block;border:1px solid #ccc}
#tip{position:absolute;display:none;background:#fffff0;border:1px solid #888;padding:4px 8px;font-size:12px;
max-width:640px;pointer-events:none;box-shadow:2px 2px 6px #0003;z-index:2}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
.lg{margin-right:12px;font-size:13px;white-space:nowrap}.bar{height:10px}.hint{color:#777;font-size:12px}
#ins td{font-size:12px}#ins th{cursor:pointer}#range{font-variant-numeric:tabular-nums}.note{color:#a40}"""

# The page's script: no libraries, no network.
_JS = r"""
(function(){
const D=JSON.parse(document.getElementById('data').textContent);
const N=D.s.length, LABEL=120, LANE=20, AXIS=26;
const cv=document.getElementById('tl'), ctx=cv.getContext('2d'), tip=document.getElementById('tip');
const oc=document.getElementById('occ'), octx=oc.getContext('2d');
let v0=0, v1=Math.max(D.latency,1), expanded=false;
const dmaTrack=D.tracks.indexOf('DMA');
function esc(s){return String(s).replace(/[&<>"']/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));}
function fmt(ns){const a=Math.abs(ns);return a>=1e6?(ns/1e6).toPrecision(4)+' ms':a>=1e3?(ns/1e3).toPrecision(4)+' µs':ns.toPrecision(4)+' ns';}
function sorted(idx,start){return idx.sort((a,b)=>start[a]-start[b]);}
const byTrack=D.tracks.map(()=>[]);for(let i=0;i<N;i++)byTrack[D.k[i]].push(i);byTrack.forEach(a=>sorted(a,D.s));
const maxDur=byTrack.map(a=>a.reduce((m,i)=>Math.max(m,D.d[i]),0));
const queues=[...new Set(D.pq)].sort((a,b)=>a-b), byQ={};
D.pq.forEach((q,j)=>(byQ[q]=byQ[q]||[]).push(j));
for(const q in byQ)sorted(byQ[q],D.ps);
const qMax={};for(const q in byQ)qMax[q]=byQ[q].reduce((m,j)=>Math.max(m,D.pd[j]),0);
function lanes(){const L=[];D.tracks.forEach((t,i)=>{
  const dma=i===dmaTrack&&queues.length;L.push({name:t+(dma?(expanded?' ▾':' ▸'):''),track:i,toggle:dma});
  if(dma&&expanded)queues.forEach(q=>L.push({name:'   queue '+q,queue:q}));});return L;}
function W(){return cv.clientWidth;}
function X(t){return LABEL+(t-v0)/(v1-v0)*(W()-LABEL);}
function T(x){return v0+(x-LABEL)/(W()-LABEL)*(v1-v0);}
function first(idx,start,t){let lo=0,hi=idx.length;while(lo<hi){const m=(lo+hi)>>1;if(start[idx[m]]<t)lo=m+1;else hi=m;}return lo;}
function laneItems(l){return l.queue!==undefined?[byQ[l.queue],D.ps,D.pd,qMax[l.queue]]:[byTrack[l.track],D.s,D.d,maxDur[l.track]];}
function colourOf(l,j){const i=l.queue!==undefined?D.pi[j]:j;return i>=0?D.colours[D.o[i]]:'#9d9d9d';}
function ticks(){const span=v1-v0,step=Math.pow(10,Math.floor(Math.log10(span/6)));const m=[1,2,5,10].find(k=>span/(step*k)<=8);return step*m;}
function drawAxis(c,h){const st=ticks();c.fillStyle='#444';c.font='11px sans-serif';c.strokeStyle='#e4e4e4';
  for(let t=Math.ceil(v0/st)*st;t<=v1;t+=st){const x=X(t);c.beginPath();c.moveTo(x,AXIS-6);c.lineTo(x,h);c.stroke();c.fillText(fmt(t),x+2,12);}}
function draw(){
  const L=lanes(),dpr=window.devicePixelRatio||1,w=W(),h=AXIS+L.length*LANE+4;
  cv.width=w*dpr;cv.height=h*dpr;cv.style.height=h+'px';ctx.setTransform(dpr,0,0,dpr,0,0);
  ctx.clearRect(0,0,w,h);drawAxis(ctx,h);
  L.forEach((l,n)=>{const y=AXIS+n*LANE;ctx.fillStyle=n%2?'#fafafa':'#fff';ctx.fillRect(LABEL,y,w-LABEL,LANE);
    ctx.fillStyle=l.toggle?'#06c':'#222';ctx.font='12px sans-serif';ctx.fillText(l.name,4,y+14);
    const [idx,start,dur,md]=laneItems(l);if(!idx)return;let lastX=-1,lastC='';
    for(let a=first(idx,start,v0-md);a<idx.length;a++){const j=idx[a],s=start[j];if(s>v1)break;
      const e=s+dur[j];if(e<v0)continue;const x0=Math.max(LABEL,X(s)),x1=Math.max(x0+1,X(e)),c=colourOf(l,j);
      if(Math.floor(x0)===lastX&&c===lastC)continue;lastX=Math.floor(x0);lastC=c;ctx.fillStyle=c;ctx.fillRect(x0,y+3,x1-x0,LANE-6);}});
  document.getElementById('range').textContent=fmt(v0)+' – '+fmt(v1)+' ('+fmt(v1-v0)+' shown of '+fmt(D.latency)+')';
  drawOcc();}
function drawOcc(){const dpr=window.devicePixelRatio||1,w=oc.clientWidth,h=oc.clientHeight;oc.width=w*dpr;oc.height=h*dpr;
  octx.setTransform(dpr,0,0,dpr,0,0);octx.clearRect(0,0,w,h);const names=Object.keys(D.occ);if(!names.length)return;
  const ph=(h-AXIS)/names.length;drawAxis(octx,h);
  names.forEach((nm,n)=>{const o=D.occ[nm],y0=AXIS+n*ph,peak=o.b.reduce((m,b)=>Math.max(m,b),0);
    const top=Math.max(Math.max(peak,o.alloc||0)*1.15,1);octx.fillStyle='#222';octx.font='12px sans-serif';  // scaled to the peaks
    const kib=v=>Math.round(v/1024).toLocaleString('en-US')+' KiB';
    octx.fillText(nm+': live data (curve), peak '+kib(peak),4,y0+14);
    octx.fillText((o.alloc!=null?'allocated peak '+kib(o.alloc)+', ':'')+'capacity '+kib(o.cap),4,y0+28);
    octx.fillText('axis to '+kib(top),4,y0+42);
    octx.beginPath();octx.moveTo(LABEL,y0+ph);let prev=0;
    for(let i=0;i<o.t.length;i++){const x=Math.min(Math.max(X(o.t[i]),LABEL),w);const y=y0+ph-(o.b[i]/top)*(ph-6);
      octx.lineTo(x,y0+ph-(prev/top)*(ph-6));octx.lineTo(x,y);prev=o.b[i];}
    octx.lineTo(w,y0+ph-(prev/top)*(ph-6));octx.lineTo(w,y0+ph);octx.closePath();octx.fillStyle=n?'#f28e2b88':'#4e79a788';octx.fill();
    if(o.alloc){const ya=y0+ph-(o.alloc/top)*(ph-6);octx.setLineDash([4,3]);octx.strokeStyle='#555';  // allocated peak
      octx.beginPath();octx.moveTo(LABEL,ya);octx.lineTo(w,ya);octx.stroke();octx.setLineDash([]);}});}
function clamp(){const len=Math.max(D.latency,1),w=Math.min(Math.max(v1-v0,Math.min(1,len)),len);
  if(v0<0)v0=0;v1=v0+w;if(v1>len){v1=len;v0=len-w;}}
function zoom(t,f){v0=t-(t-v0)*f;v1=t+(v1-t)*f;clamp();draw();}
cv.addEventListener('wheel',e=>{e.preventDefault();if(e.offsetX<LABEL)return;zoom(T(e.offsetX),e.deltaY>0?1.25:0.8);},{passive:false});
document.getElementById('zin').onclick=()=>zoom((v0+v1)/2,0.5);
document.getElementById('zout').onclick=()=>zoom((v0+v1)/2,2);
document.getElementById('reset').onclick=()=>{v0=0;v1=Math.max(D.latency,1);draw();};
let drag=null;
cv.addEventListener('mousedown',e=>{const n=Math.floor((e.offsetY-AXIS)/LANE),L=lanes();
  if(e.offsetX<LABEL&&L[n]&&L[n].toggle){expanded=!expanded;draw();return;}drag={x:e.offsetX,v0,v1};});
window.addEventListener('mouseup',()=>{drag=null;});
function hit(x,y){const L=lanes(),n=Math.floor((y-AXIS)/LANE);if(n<0||n>=L.length||x<LABEL)return null;
  const l=L[n],[idx,start,dur,md]=laneItems(l);if(!idx)return null;const t=T(x),tol=3*(v1-v0)/(W()-LABEL);let best=null,bd=1e300;
  for(let a=first(idx,start,t-md-tol);a<idx.length;a++){const j=idx[a],s=start[j];if(s>t+tol)break;
    const e=s+dur[j],dist=t<s?s-t:t>e?t-e:0;if(dist<=tol&&dist<bd){bd=dist;best=j;}}
  if(best===null)return null;return l.queue!==undefined?{i:D.pi[best],q:l.queue,s:D.ps[best],d:D.pd[best]}:{i:best,s:D.s[best],d:D.d[best]};}
function describe(h){const i=h.i;if(i<0)return 'a DMA transfer left out of this report (--every)';
  return '<b>'+esc(D.ops[D.o[i]])+'</b> on '+esc(D.tracks[D.k[i]])+(h.q!==undefined?' (queue '+h.q+')':'')+
   ' · instruction #'+D.i[i]+'<br>start '+fmt(h.s)+' · duration '+fmt(h.d)+'<br>'+esc(D.operands[D.x[i]])+
   '<br>source: <code class=src>'+esc(D.locs[D.l[i]])+'</code>';}
cv.addEventListener('mousemove',e=>{
  if(drag){const dt=(e.offsetX-drag.x)/(W()-LABEL)*(drag.v1-drag.v0);v0=drag.v0-dt;v1=drag.v1-dt;clamp();draw();tip.style.display='none';return;}
  const h=hit(e.offsetX,e.offsetY);if(!h){tip.style.display='none';return;}
  tip.innerHTML=describe(h);tip.style.display='block';tip.style.left=Math.min(e.offsetX+14,W()-320)+'px';tip.style.top=(e.offsetY+14)+'px';});
cv.addEventListener('mouseleave',()=>{tip.style.display='none';});
cv.addEventListener('dblclick',()=>{v0=0;v1=Math.max(D.latency,1);draw();});
// the instruction table
const body=document.querySelector('#ins tbody'),count=document.getElementById('count'),filter=document.getElementById('filter');
let order=[...Array(N).keys()],key='i',dir=1;const SHOW=300;
function cell(k,i){return k==='o'?D.ops[D.o[i]]:k==='k'?D.tracks[D.k[i]]:k==='l'?D.locs[D.l[i]]:D[k][i];}
function table(){const q=filter.value.toLowerCase();
  const rows=q?order.filter(i=>(D.ops[D.o[i]]+' '+D.tracks[D.k[i]]+' '+D.locs[D.l[i]]+' '+D.operands[D.x[i]]).toLowerCase().includes(q)):order;
  body.innerHTML=rows.slice(0,SHOW).map(i=>'<tr><td class=n>'+D.i[i]+'</td><td><span class=sw style="background:'+D.colours[D.o[i]]+'"></span>'+
    esc(D.ops[D.o[i]])+'</td><td>'+esc(D.tracks[D.k[i]])+'</td><td class=n>'+fmt(D.s[i])+'</td><td class=n>'+fmt(D.d[i])+
    '</td><td><code>'+esc(D.locs[D.l[i]])+'</code></td><td>'+esc(D.operands[D.x[i]])+'</td></tr>').join('');
  count.textContent=rows.length.toLocaleString()+' of '+N.toLocaleString()+' instructions'+(rows.length>SHOW?', first '+SHOW+' shown':'');}
document.querySelectorAll('#ins th[data-k]').forEach(th=>th.onclick=()=>{const k=th.dataset.k;dir=k===key?-dir:(k==='d'?-1:1);key=k;
  order.sort((a,b)=>{const x=cell(k,a),y=cell(k,b);return (x<y?-1:x>y?1:a-b)*dir;});table();});
filter.addEventListener('input',table);
window.addEventListener('resize',draw);
draw();table();
window.trnsimProfile={view:()=>[v0,v1],x:X,laneY:n=>AXIS+n*LANE+LANE/2,lanes:()=>lanes().map(l=>l.name),spans:N,
  at:i=>({start:D.s[i],duration:D.d[i],lane:lanes().findIndex(l=>l.track===D.k[i]),source:D.locs[D.l[i]]})};
document.body.dataset.ready='1';
})();
"""
