// TideKV operator dashboard: polls the node's JSON API and renders it.
// Plain JavaScript with no dependencies and no build step. Every string from
// the API reaches the DOM through textContent or setAttribute, never as
// markup.
(function () {
  "use strict";

  const POLL_MS = 2000;
  const FETCH_TIMEOUT_MS = 8000;
  const SVG_NS = "http://www.w3.org/2000/svg";
  // Relative paths, so the dashboard also works behind a path prefix.
  const ENDPOINTS = {
    status: "api/status",
    ranges: "api/ranges",
    events: "api/events?limit=200",
    series: "api/series",
    autoscale: "api/autoscale",
    whoami: "api/whoami",
  };
  // Cool-to-hot scale (ColorBrewer RdYlBu); .legend-scale in style.css matches.
  const HEAT = [
    [0.0, [69, 117, 180]],
    [0.125, [116, 173, 209]],
    [0.25, [171, 217, 233]],
    [0.375, [224, 243, 248]],
    [0.5, [255, 255, 191]],
    [0.625, [254, 224, 144]],
    [0.75, [253, 174, 97]],
    [0.875, [244, 109, 67]],
    [1.0, [215, 48, 39]],
  ];

  const rendered = {};
  let lastOK = null;
  let lastSeries = null;
  let lastRanges = null;
  let lastAutoscale = null;

  // ---- small helpers ----

  function $(id) {
    return document.getElementById(id);
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function td(text, cls) {
    return el("td", cls, text);
  }

  function num(v) {
    const n = Number(v);
    return Number.isFinite(n) ? n : 0;
  }

  function str(v) {
    return v === undefined || v === null ? "" : String(v);
  }

  function arr(v) {
    return Array.isArray(v) ? v : [];
  }

  // ---- formatting ----

  const nf0 = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
  const nf1 = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });

  function fmtQPS(v) {
    v = num(v);
    return v >= 100 ? nf0.format(v) : nf1.format(v);
  }

  function fmtCompact(v) {
    v = num(v);
    const a = Math.abs(v);
    if (a >= 1e9) return trim(v / 1e9) + "G";
    if (a >= 1e6) return trim(v / 1e6) + "M";
    if (a >= 1e3) return trim(v / 1e3) + "k";
    return trim(v);
  }

  function trim(v) {
    return String(Number(v.toFixed(Math.abs(v) >= 10 ? 0 : 2)));
  }

  function fmtBytes(v) {
    v = num(v);
    if (v < 1024) return nf0.format(v) + " B";
    const units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let i = -1;
    do {
      v /= 1024;
      i++;
    } while (v >= 1024 && i < units.length - 1);
    return (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + " " + units[i];
  }

  function fmtMs(v) {
    v = num(v);
    return v >= 100 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toFixed(2);
  }

  function pad(n, w) {
    return String(n).padStart(w || 2, "0");
  }

  // Times are shown in UTC: a cluster spans time zones, its logs use UTC.
  function fmtClock(d, ms) {
    const s = pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds());
    return ms ? s + "." + pad(d.getUTCMilliseconds(), 3) : s;
  }

  function fmtDateTime(d) {
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " + fmtClock(d, true);
  }

  function keyCell(k, isEnd) {
    const c = el("td", "key mono");
    if (k === "") {
      c.textContent = isEnd ? "(max)" : "(min)";
      c.classList.add("muted");
      c.title = isEnd ? "end of the key space" : "beginning of the key space";
    } else {
      c.textContent = k;
      c.title = k;
    }
    return c;
  }

  function keyLabel(k, isEnd) {
    return k === "" ? (isEnd ? "(max)" : "(min)") : k;
  }

  // admissionCell shows a node's admission control: "ok", or how much it
  // admits, its queueing delay and its refusals per second while it sheds.
  function admissionCell(a) {
    const share = num(a.admit_share);
    if (share === 0) return td("–", "muted");
    if (!a.overloaded && share >= 1 && num(a.rejected_qps) < 0.5) return td("ok", "muted");
    const c = el("td", "nowrap");
    c.append(el("span", "badge badge-" + (a.overloaded ? "bad" : "warn"), "admits " + (share * 100).toFixed(0) + "%"));
    c.append(el("span", "sub", "delay " + fmtMs(a.queue_delay_ms) + " ms, " + fmtQPS(a.rejected_qps) + " refused/s"));
    return c;
  }

  // clockCell shows a node's offset monitor: the largest offset it measured
  // to a peer, and a badge with the reason while its clock is untrusted
  // (it then holds no leases).
  function clockCell(c) {
    const off = num(c.max_offset_ms);
    const text = (off > 0 ? "+" : "") + off.toFixed(0) + " ms";
    if (!c.untrusted) return off === 0 ? td("–", "muted") : td(text, "num");
    const cell = el("td", "nowrap");
    const b = el("span", "badge badge-bad", "untrusted");
    b.title = str(c.reason);
    cell.append(b, el("span", "sub", text + ", no leases"));
    return cell;
  }

  function stateClass(s) {
    s = str(s).toLowerCase();
    if (/^(live|alive|up|healthy|ok|ready|running)\b/.test(s)) return "ok";
    if (/dead|down|fail|unavailable|lost|error/.test(s)) return "bad";
    if (/suspect|unreach|lagging|slow|degraded/.test(s)) return "warn";
    if (/drain|decommission|leav|remov/.test(s)) return "drain";
    if (/join|bootstrap|start|init|recover|catch/.test(s)) return "info";
    return "neutral";
  }

  function heat(t) {
    t = Math.min(1, Math.max(0, t));
    for (let i = 1; i < HEAT.length; i++) {
      const [t1, c1] = HEAT[i];
      if (t <= t1) {
        const [t0, c0] = HEAT[i - 1];
        const f = (t - t0) / (t1 - t0);
        return c0.map((v, j) => Math.round(v + (c1[j] - v) * f));
      }
    }
    return HEAT[HEAT.length - 1][1];
  }

  function rgb(c) {
    return "rgb(" + c.join(",") + ")";
  }

  function inkFor(c) {
    const lum = (0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2]) / 255;
    return lum > 0.6 ? "#1f2933" : "#ffffff";
  }

  function hue(s) {
    let h = 0;
    for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0;
    return h % 360;
  }

  // ---- status: header, nodes, imbalance ----

  function renderStatus(st) {
    const cid = str(st.cluster_id);
    $("cluster-id").textContent = cid || "–";
    $("cluster-id").title = cid;
    $("node-id").textContent = st.node_id ? "n" + num(st.node_id) : "–";
    $("range-count").textContent = nf0.format(num(st.range_count));

    const nodes = arr(st.nodes).slice().sort((a, b) => num(a.id) - num(b.id));
    const live = nodes.filter((n) => stateClass(n.state) === "ok").length;
    $("node-count").textContent = nodes.length + " (" + live + " live)";

    const rows = nodes.map((n) => {
      const tr = el("tr");
      tr.dataset.nodeId = String(num(n.id));

      const idc = td("n" + num(n.id), "num strong");
      if (num(n.id) === num(st.node_id)) {
        tr.classList.add("self");
        idc.title = "this page is served by this node";
        idc.prepend(el("span", "self-dot", "●"));
      }
      tr.append(idc);

      const addr = el("td", "mono");
      addr.append(el("span", null, str(n.addr) || "–"));
      if (str(n.http_addr)) {
        const a = el("a", "sub", str(n.http_addr));
        a.href = location.protocol + "//" + str(n.http_addr) + "/";
        a.title = "open this node's dashboard";
        addr.append(a);
      }
      tr.append(addr);

      const stc = el("td");
      const badge = el("span", "badge badge-" + stateClass(n.state), str(n.state) || "unknown");
      const seen = num(n.last_seen_seconds);
      badge.title = "last seen " + seen.toFixed(1) + " s ago";
      stc.append(badge);
      if (seen >= 5) stc.append(el("span", "sub warn-text", "seen " + fmtCompact(seen) + " s ago"));
      tr.append(stc);

      tr.append(td(str(n.locality) || "–", str(n.locality) ? "mono small nowrap" : "muted"));
      tr.append(td(nf0.format(num(n.replicas)), "num"));
      tr.append(td(nf0.format(num(n.leases)), "num"));
      tr.append(td(fmtBytes(n.bytes), "num"));
      tr.append(td(fmtQPS(n.qps), "num"));

      const cpu = Math.max(0, num(n.cpu));
      const cpuc = el("td", "num");
      const meter = el("span", "meter" + (cpu >= 0.85 ? " hot" : cpu >= 0.6 ? " warm" : ""));
      const fill = el("span", "meter-fill");
      fill.style.width = Math.min(100, cpu * 100).toFixed(1) + "%";
      meter.append(fill);
      cpuc.append(meter, el("span", "meter-val", (cpu * 100).toFixed(0) + "%"));
      // A sized node's CPU is the utilisation of its own quota.
      const quota = num(n.cpu_quota);
      if (quota > 0) cpuc.append(el("span", "sub", "of " + quota + " CPUs"));
      tr.append(cpuc);

      tr.append(td(num(n.score).toFixed(2), "num"));
      tr.append(td(fmtMs(n.p99_ms), "num"));
      tr.append(clockCell(n.clock || {}));
      tr.append(admissionCell(n.admission || {}));
      return tr;
    });
    if (!rows.length) {
      const tr = el("tr", "empty");
      const c = td("no nodes reported", "muted");
      c.colSpan = 13;
      tr.append(c);
      rows.push(tr);
    }
    $("nodes").tBodies[0].replaceChildren(...rows);

    const imb = st.imbalance || {};
    const items = [
      ["replicas", "Replicas"],
      ["bytes", "Data"],
      ["qps", "QPS"],
      ["cpu", "CPU"],
    ].map(([k, label]) => {
      const v = Math.max(0, num(imb[k]));
      const item = el("div", "imb");
      item.dataset.dim = k;
      item.title = label + " imbalance " + v.toFixed(3) + " (0 = evenly spread)";
      const bar = el("span", "imb-bar");
      const fill = el("span", "imb-fill");
      fill.style.width = Math.min(100, v * 100).toFixed(1) + "%";
      bar.append(fill);
      item.append(el("span", "imb-label", label), bar, el("span", "imb-val", v.toFixed(2)));
      return item;
    });
    $("imbalance").replaceChildren(...items);
  }

  // ---- ranges: key-space bar and table ----

  function replicaChip(r, leader) {
    const node = num(r.node);
    const type = str(r.type) || "voter";
    const isLeader = node !== 0 && node === leader;
    const chip = el("span", "replica replica-" + (/^[a-z_-]+$/.test(type) ? type : "other"));
    if (isLeader) chip.classList.add("leader");
    chip.textContent = (isLeader ? "★ " : "") + "n" + node + (type !== "voter" ? " " + type : "");
    chip.title = "n" + node + " · " + type + (isLeader ? " · leaseholder" : "");
    return chip;
  }

  function highlight(id, on) {
    document.querySelectorAll('[data-range-id="' + CSS.escape(id) + '"]').forEach((e) => e.classList.toggle("hl", on));
  }

  function renderRanges(data) {
    lastRanges = data;
    const ranges = arr(data.ranges);
    const maxQ = ranges.reduce((m, r) => Math.max(m, num(r.qps)), 0);
    const totalB = ranges.reduce((s, r) => s + Math.max(0, num(r.bytes)), 0);
    // A floor keeps tiny ranges visible next to huge ones.
    const floor = totalB * 0.01;
    const weights = ranges.map((r) => (totalB > 0 ? Math.max(num(r.bytes), floor) : 1));
    const sumW = weights.reduce((s, w) => s + w, 0) || 1;

    const barWidth = $("keyspace").clientWidth || 1000;
    const segs = [];
    const rows = [];
    ranges.forEach((r, i) => {
      const id = String(num(r.id));
      const leader = num(r.leader);
      const color = heat(maxQ > 0 ? num(r.qps) / maxQ : 0);
      const reps = arr(r.replicas);

      const seg = el("div", "range-seg");
      seg.dataset.rangeId = id;
      seg.style.flex = ((weights[i] / sumW) * 1000).toFixed(4) + " 1 0px";
      seg.style.backgroundColor = rgb(color);
      seg.style.color = inkFor(color);
      // Clipped labels read as noise; narrow segments rely on the tooltip.
      if ((weights[i] / sumW) * barWidth >= 12 + 7 * (id.length + 1)) seg.textContent = "r" + id;
      seg.title = [
        "r" + id + "  [" + keyLabel(str(r.start), false) + ", " + keyLabel(str(r.end), true) + ")",
        "replicas: " + (reps.map((p) => "n" + num(p.node) + " " + (str(p.type) || "voter")).join(", ") || "none"),
        "leaseholder: " + (leader ? "n" + leader : "none"),
        "qps: " + fmtQPS(r.qps),
        "data: " + fmtBytes(r.bytes),
      ].join("\n");
      if (!leader) seg.classList.add("no-leader");
      seg.addEventListener("mouseenter", () => highlight(id, true));
      seg.addEventListener("mouseleave", () => highlight(id, false));
      seg.addEventListener("click", () => {
        const row = document.querySelector('#ranges tbody tr[data-range-id="' + CSS.escape(id) + '"]');
        if (row) row.scrollIntoView({ block: "nearest", behavior: "smooth" });
      });
      segs.push(seg);

      const tr = el("tr");
      tr.dataset.rangeId = id;
      tr.append(td("r" + id, "num strong"));
      tr.append(keyCell(str(r.start), false));
      tr.append(keyCell(str(r.end), true));
      const rc = el("td", "replicas");
      reps.forEach((p) => rc.append(replicaChip(p, leader)));
      if (!reps.length) rc.append(el("span", "muted", "none"));
      if (!leader) rc.append(el("span", "sub warn-text", "no leaseholder"));
      tr.append(rc);
      const qc = el("td", "num");
      const sw = el("span", "swatch");
      sw.style.backgroundColor = rgb(color);
      qc.append(sw, document.createTextNode(fmtQPS(r.qps)));
      tr.append(qc);
      tr.append(td(fmtBytes(r.bytes), "num"));
      tr.addEventListener("mouseenter", () => highlight(id, true));
      tr.addEventListener("mouseleave", () => highlight(id, false));
      rows.push(tr);
    });
    if (!segs.length) segs.push(el("div", "keyspace-empty", "no ranges reported"));
    $("keyspace").replaceChildren(...segs);
    $("ranges").tBodies[0].replaceChildren(...rows);
    $("legend-min").textContent = "0";
    $("legend-max").textContent = fmtQPS(maxQ);
  }

  // ---- events ----

  function renderEvents(data) {
    const rows = arr(data.events)
      .slice()
      .reverse()
      .map((ev) => {
        const tr = el("tr");
        const d = new Date(str(ev.time));
        const tc = td(isNaN(d.getTime()) ? str(ev.time) : fmtDateTime(d), "mono nowrap");
        tc.title = str(ev.time);
        tr.append(tc);
        tr.append(td(ev.node ? "n" + num(ev.node) : "–", "num"));
        const kind = str(ev.kind);
        const kc = el("td");
        const chip = el("span", "kind", kind || "–");
        const h = hue(kind);
        chip.style.backgroundColor = "hsl(" + h + " 70% 94%)";
        chip.style.color = "hsl(" + h + " 55% 30%)";
        kc.append(chip);
        tr.append(kc);
        tr.append(td(str(ev.subject), "nowrap"));
        tr.append(td(str(ev.reason), "reason"));
        return tr;
      });
    if (!rows.length) {
      const tr = el("tr", "empty");
      const c = td("no events", "muted");
      c.colSpan = 5;
      tr.append(c);
      rows.push(tr);
    }
    $("events").tBodies[0].replaceChildren(...rows);
  }

  // ---- series: line charts ----

  function niceStep(raw) {
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p;
  }

  const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400].map((s) => s * 1000);

  function drawChart(box, pts, opts) {
    const W = Math.max(260, Math.floor(box.clientWidth || 480));
    const H = 178;
    const m = { l: 48, r: 16, t: 20, b: 24 };
    const iw = W - m.l - m.r;
    const ih = H - m.t - m.b;
    const svg = svgEl("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": opts.label });
    if (!pts.length) {
      svg.append(svgEl("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "no-data" }, "no data"));
      box.replaceChildren(svg);
      return;
    }

    const interval = Math.max(1, num(opts.interval) || 1000);
    let t0 = pts[0][0];
    const t1 = pts[pts.length - 1][0];
    if (t1 - t0 < interval) t0 = t1 - interval;
    const vmax = pts.reduce((mx, p) => Math.max(mx, p[1]), 0);
    const ystep = niceStep((vmax > 0 ? vmax : 1) / 4);
    const ymax = Math.max(ystep, Math.ceil(vmax / ystep) * ystep);
    const x = (t) => m.l + ((t - t0) / (t1 - t0)) * iw;
    const y = (v) => m.t + ih - (v / ymax) * ih;

    const grid = svgEl("g", { class: "grid" });
    for (let v = 0; v <= ymax + ystep / 2; v += ystep) {
      grid.append(svgEl("line", { x1: m.l, x2: m.l + iw, y1: y(v), y2: y(v), class: v === 0 ? "axis" : "gridline" }));
      grid.append(svgEl("text", { x: m.l - 6, y: y(v) + 4, "text-anchor": "end" }, fmtCompact(v)));
    }
    const span = t1 - t0;
    const tstep = TIME_STEPS.find((s) => span / s <= 5) || TIME_STEPS[TIME_STEPS.length - 1];
    for (let t = Math.ceil(t0 / tstep) * tstep; t <= t1; t += tstep) {
      grid.append(svgEl("line", { x1: x(t), x2: x(t), y1: m.t + ih, y2: m.t + ih + 4, class: "axis" }));
      const d = new Date(t);
      const label = tstep >= 60000 ? fmtClock(d).slice(0, 5) : fmtClock(d);
      grid.append(svgEl("text", { x: x(t), y: H - 6, "text-anchor": "middle" }, label));
    }
    grid.append(svgEl("text", { x: m.l - 6, y: 9, "text-anchor": "end", class: "unit" }, opts.unit));
    grid.append(svgEl("text", { x: m.l + iw, y: 9, "text-anchor": "end", class: "unit" }, "UTC"));
    svg.append(grid);

    // Break the line where samples are missing rather than bridging the gap.
    const runs = [];
    let run = [];
    pts.forEach((p, i) => {
      if (i > 0 && p[0] - pts[i - 1][0] > 3 * interval) {
        runs.push(run);
        run = [];
      }
      run.push(p);
    });
    runs.push(run);
    runs.forEach((r) => {
      const line = r.map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join(" ");
      if (r.length > 1) {
        const area = line + " L" + x(r[r.length - 1][0]).toFixed(1) + " " + y(0) + " L" + x(r[0][0]).toFixed(1) + " " + y(0) + " Z";
        svg.append(svgEl("path", { d: area, fill: opts.color, "fill-opacity": 0.1, stroke: "none" }));
      }
      svg.append(svgEl("path", { d: line, fill: "none", stroke: opts.color, "stroke-width": 1.75, "stroke-linejoin": "round" }));
    });
    const last = pts[pts.length - 1];
    svg.append(svgEl("circle", { cx: x(last[0]), cy: y(last[1]), r: 3, fill: opts.color }));

    // Hover read-out: nearest sample to the pointer.
    const hover = svgEl("g", { class: "hover", visibility: "hidden" });
    const vline = svgEl("line", { y1: m.t, y2: m.t + ih, class: "hover-line" });
    const dot = svgEl("circle", { r: 3.5, fill: "#fff", stroke: opts.color, "stroke-width": 2 });
    const tip = svgEl("text", { y: m.t + 12, class: "hover-text" });
    hover.append(vline, dot, tip);
    svg.append(hover);
    svg.addEventListener("mousemove", (e) => {
      const px = e.clientX - svg.getBoundingClientRect().left;
      const t = t0 + ((px - m.l) / iw) * (t1 - t0);
      let best = pts[0];
      for (const p of pts) if (Math.abs(p[0] - t) < Math.abs(best[0] - t)) best = p;
      const bx = x(best[0]);
      vline.setAttribute("x1", bx);
      vline.setAttribute("x2", bx);
      dot.setAttribute("cx", bx);
      dot.setAttribute("cy", y(best[1]));
      tip.textContent = fmtClock(new Date(best[0])) + "  " + opts.fmt(best[1]) + " " + opts.unit;
      const right = bx > m.l + iw / 2;
      tip.setAttribute("x", right ? bx - 6 : bx + 6);
      tip.setAttribute("text-anchor", right ? "end" : "start");
      hover.setAttribute("visibility", "visible");
    });
    svg.addEventListener("mouseleave", () => hover.setAttribute("visibility", "hidden"));

    box.replaceChildren(svg);
  }

  function renderSeries(data) {
    lastSeries = data;
    const pts = arr(data.points)
      .filter((p) => p && Number.isFinite(Number(p.t)))
      .sort((a, b) => num(a.t) - num(b.t));
    const qps = pts.map((p) => [num(p.t), num(p.qps)]);
    const p99 = pts.map((p) => [num(p.t), num(p.p99_ms)]);
    drawChart($("chart-qps"), qps, { unit: "qps", fmt: fmtQPS, color: "#2563eb", interval: data.interval_ms, label: "cluster throughput over time" });
    drawChart($("chart-p99"), p99, { unit: "ms", fmt: fmtMs, color: "#d9480f", interval: data.interval_ms, label: "cluster p99 latency over time" });
    $("qps-now").textContent = qps.length ? fmtQPS(qps[qps.length - 1][1]) + " qps" : "–";
    $("p99-now").textContent = p99.length ? fmtMs(p99[p99.length - 1][1]) + " ms" : "–";
  }

  // ---- elasticity: the controller's state, decisions and timeline ----

  function renderAutoscale(st) {
    lastAutoscale = st;
    const pol = st.policy || {};
    $("elastic-state").textContent =
      (st.enabled ? "enabled" : "disabled") + " · actuator " + (str(st.actuator) || "–") + " · " + (str(pol.controller) || "–");
    const mig = num(st.migration_bytes_per_sec) / 1048576;
    $("elastic-summary").textContent =
      num(st.nodes) + " nodes serving, target " + num(st.target_nodes) +
      " (" + num(st.pending_out) + " starting, " + num(st.pending_in) + " draining) · " +
      fmtQPS(num(st.offered_ops)) + " ops/s offered, p99 " + fmtMs(num(st.p99_ms)) + " ms against " + fmtMs(num(pol.slo_p99_ms)) +
      " ms · migration " + mig.toFixed(0) + " MiB/s: " + str(st.migration_reason);
    const rows = arr(st.decisions)
      .slice()
      .reverse()
      .map((d) => {
        const tr = el("tr");
        const t = new Date(str(d.at));
        tr.append(td(isNaN(t.getTime()) ? str(d.at) : fmtDateTime(t), "mono nowrap"));
        tr.append(td(str(d.action), "nowrap"));
        tr.append(td(num(d.nodes_before) + "→" + num(d.nodes_after), "num"));
        tr.append(td(str(d.reason), "reason"));
        return tr;
      });
    if (!rows.length) {
      const tr = el("tr", "empty");
      const c = td("no scaling decisions yet", "muted");
      c.colSpan = 4;
      tr.append(c);
      rows.push(tr);
    }
    $("elastic-decisions").tBodies[0].replaceChildren(...rows);
    const tl = arr(st.timeline).filter((p) => p && !isNaN(Date.parse(p.at)));
    const nodes = tl.map((p) => [Date.parse(p.at), num(p.nodes)]);
    const allowance = tl.map((p) => [Date.parse(p.at), num(p.migration_bytes_per_sec) / 1048576]);
    drawChart($("chart-nodes"), nodes, { unit: "nodes", fmt: (v) => String(Math.round(v)), color: "#0f766e", interval: 1000, label: "serving nodes over time" });
    drawChart($("chart-migration"), allowance, { unit: "MiB/s", fmt: (v) => v.toFixed(0), color: "#7c3aed", interval: 1000, label: "migration allowance per node over time" });
    $("nodes-now").textContent = num(st.nodes) + " (target " + num(st.target_nodes) + ")";
    $("migration-now").textContent = mig.toFixed(0) + " MiB/s";
  }

  // ---- who is logged in; cluster settings (admins only) ----

  // renderWhoami names the user of a secure node and, for an admin (anyone
  // on an insecure node), builds the settings form once: other roles never
  // get it, and the node refuses their settings requests anyway.
  function renderWhoami(w) {
    const session = $("session");
    session.hidden = !w.secure;
    $("session-user").textContent = w.secure ? str(w.user) + " (" + str(w.role) + ")" : "";
    if (w.role === "admin" && !$("settings-form")) buildSettings();
  }

  function buildSettings() {
    const sec = $("settings");
    const form = el("form", "settings-form");
    form.id = "settings-form";
    const key = el("input");
    key.name = "key";
    key.placeholder = "setting (e.g. range-max-bytes)";
    key.required = true;
    const value = el("input");
    value.name = "value";
    value.placeholder = "value (empty restores the default)";
    const msg = el("span", "hint");
    form.append(key, value, el("button", null, "Set"), msg);
    const table = el("table", "grid");
    table.id = "settings-table";
    table.createTHead().append(el("tr"));
    table.tHead.rows[0].append(el("th", null, "Setting"), el("th", null, "Value"));
    table.createTBody();
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      msg.textContent = "";
      try {
        const r = await fetch("api/settings", {
          method: "POST",
          cache: "no-store",
          headers: { "Content-Type": "application/json", Accept: "application/json" },
          body: JSON.stringify({ key: key.value, value: value.value }),
        });
        const body = await r.json().catch(() => ({}));
        if (!r.ok) throw new Error(body.error || "HTTP " + r.status);
        renderSettings(body);
        msg.textContent = "saved";
      } catch (e) {
        msg.textContent = (e && e.message) || String(e);
      }
    });
    sec.replaceChildren(el("h2", null, "Cluster settings"), form, table);
    sec.querySelector("h2").id = "settings-h";
    sec.hidden = false;
    fetchJSON("api/settings").then(renderSettings, (e) => (msg.textContent = (e && e.message) || String(e)));
  }

  function renderSettings(v) {
    const rows = arr(v.settings).map((s) => {
      const tr = el("tr");
      tr.append(td(str(s.key), "mono"), td(str(s.value), "mono"));
      return tr;
    });
    if (!rows.length) rows.push(el("tr"));
    $("settings-table").tBodies[0].replaceChildren(...rows);
  }

  // ---- polling ----

  const RENDER = { status: renderStatus, ranges: renderRanges, events: renderEvents, series: renderSeries, autoscale: renderAutoscale, whoami: renderWhoami };

  async function fetchJSON(path) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), FETCH_TIMEOUT_MS);
    try {
      const r = await fetch(path, { cache: "no-store", signal: ctl.signal, headers: { Accept: "application/json" } });
      if (r.status === 401) {
        // Not logged in, or the session ended: the login page, once.
        if (!document.body.dataset.loggedOut) location.assign("login");
        document.body.dataset.loggedOut = "1";
      }
      if (!r.ok) {
        let body = "";
        try {
          body = (await r.text()).trim().slice(0, 200);
        } catch (e) {
          // The status line alone is enough.
        }
        throw new Error("HTTP " + r.status + (r.statusText ? " " + r.statusText : "") + (body ? ": " + body : ""));
      }
      return await r.json();
    } catch (e) {
      if (e && e.name === "AbortError") throw new Error("timed out after " + FETCH_TIMEOUT_MS / 1000 + " s");
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  function showErrors(errors, now) {
    const banner = $("error-banner");
    if (!errors.length) {
      banner.hidden = true;
      banner.replaceChildren();
      return;
    }
    const head = el("strong", null, "Refresh failed at " + fmtClock(now) + " UTC. ");
    const since = el("span", null, lastOK ? "Showing data from " + fmtClock(lastOK) + " UTC." : "No complete data yet.");
    const list = el("ul");
    errors.forEach((m) => list.append(el("li", null, m)));
    banner.replaceChildren(head, since, list);
    banner.hidden = false;
  }

  async function poll() {
    const names = Object.keys(ENDPOINTS);
    const results = await Promise.allSettled(names.map((n) => fetchJSON(ENDPOINTS[n])));
    const errors = [];
    results.forEach((res, i) => {
      const name = names[i];
      const path = "/" + ENDPOINTS[name].split("?")[0];
      if (res.status === "fulfilled") {
        try {
          RENDER[name](res.value || {});
          rendered[name] = true;
          document.querySelectorAll('.placeholder[data-for="' + name + '"]').forEach((e) => (e.hidden = true));
        } catch (e) {
          console.error(e);
          errors.push(path + ": cannot render response: " + (e && e.message));
        }
      } else {
        errors.push(path + ": " + ((res.reason && res.reason.message) || String(res.reason)));
      }
    });
    const now = new Date();
    if (!errors.length) lastOK = now;
    const upd = $("updated");
    upd.textContent = lastOK ? fmtClock(lastOK) + " UTC" : "never";
    upd.classList.toggle("stale", errors.length > 0);
    showErrors(errors, now);
    if (names.every((n) => rendered[n])) document.body.dataset.ready = "1";
    document.body.dataset.polled = "1";
  }

  function loop() {
    poll()
      .catch((e) => console.error(e))
      .finally(() => setTimeout(loop, POLL_MS));
  }

  let resizeTimer = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      if (lastSeries) renderSeries(lastSeries);
      if (lastRanges) renderRanges(lastRanges);
      if (lastAutoscale) renderAutoscale(lastAutoscale);
    }, 150);
  });

  loop();
})();
