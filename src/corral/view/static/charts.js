// The viewer's charts, drawn as plain SVG with DOM calls: every label is a text node
// (createTextNode), never markup, so a task id or model name made of HTML stays text.
// No library, no build step: app.js calls window.CorralCharts.
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const COLOURS = ["#3b7dd8", "#e07a00", "#1f9a6a", "#a34fc8", "#c8324a", "#6a7386"];

  function svg(tag, attrs, ...kids) {
    const node = document.createElementNS(NS, tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined) node.setAttribute(name, String(value));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined) continue;
      node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  }

  // A tooltip: the SVG <title> element, its text a text node.
  function tip(text) {
    return svg("title", {}, text);
  }

  function figure(id, title, chart, caption) {
    const node = document.createElement("figure");
    node.className = "chart";
    if (id) node.id = id;
    const head = document.createElement("figcaption");
    head.textContent = title;
    node.append(head, chart);
    if (caption) {
      const note = document.createElement("div");
      note.className = "note";
      note.textContent = caption;
      node.append(note);
    }
    return node;
  }

  function fmt(value, digits) {
    if (value === null || value === undefined || typeof value !== "number") return "–";
    if (Number.isInteger(value) && Math.abs(value) >= 1000) return value.toLocaleString("en");
    return value.toFixed(digits === undefined ? 2 : digits);
  }

  function short(text, size) {
    return text.length > size ? text.slice(0, size - 1) + "…" : text;
  }

  // A histogram (corral/view/_charts.py's `histogram`): bars of counts from low to high.
  function histogram(id, title, h, unit, digits) {
    const width = 360, height = 150, left = 36, bottom = 20, top = 6;
    const root = svg("svg", { class: "chart", viewBox: "0 0 " + width + " " + height, width: width, height: height, role: "img" });
    root.append(tip(title));
    if (!h || !h.count) return figure(id, title, root, "no values");
    const most = Math.max(...h.bins);
    const plotW = width - left - 6, plotH = height - bottom - top;
    const step = (h.high - h.low) / h.bins.length;
    h.bins.forEach((count, i) => {
      const w = plotW / Math.max(h.bins.length, 5); // one value: a bar, not a wall
      const barH = most ? (count / most) * plotH : 0;
      const from = h.low + i * step, to = from + step;
      root.append(svg("rect", { class: "bar", x: left + i * w + 1, y: top + plotH - barH, width: Math.max(1, w - 2), height: barH },
        tip((step ? fmt(from, digits) + " – " + fmt(to, digits) : fmt(h.low, digits)) + unit + ": " + count + " trials")));
    });
    root.append(
      svg("line", { class: "axis", x1: left, y1: top + plotH, x2: width - 6, y2: top + plotH }),
      svg("text", { x: left, y: height - 4, class: "tick" }, fmt(h.low, digits) + unit),
      svg("text", { x: width - 6, y: height - 4, class: "tick", "text-anchor": "end" }, fmt(h.high, digits) + unit),
      svg("text", { x: left - 4, y: top + 10, class: "tick", "text-anchor": "end" }, fmt(most, 0)),
      svg("text", { x: left - 4, y: top + plotH, class: "tick", "text-anchor": "end" }, "0"));
    return figure(id, title, root, fmt(h.count, 0) + " · mean " + fmt(h.mean, digits) + unit + " · median " + fmt(h.median, digits) + unit);
  }

  // Values in [0, 1] by k, each with its interval: one line of points and whiskers per
  // series ({name, points: [{k, value, low, high}]}).
  function byK(id, title, series) {
    const ks = Array.from(new Set(series.flatMap((s) => s.points.map((p) => String(p.k))))).sort((a, b) => a - b);
    const width = Math.max(260, 80 + ks.length * 70), height = 190, left = 36, right = 12, top = 10, bottom = 24;
    const plotW = width - left - right, plotH = height - top - bottom;
    const x = (k, i) => left + ((ks.indexOf(String(k)) + 0.5) / ks.length) * plotW + (i - (series.length - 1) / 2) * 6;
    const y = (v) => top + (1 - Math.max(0, Math.min(1, v))) * plotH;
    const root = svg("svg", { class: "chart", viewBox: "0 0 " + width + " " + height, width: width, height: height, role: "img" });
    root.append(tip(title));
    for (const v of [0, 0.25, 0.5, 0.75, 1]) {
      root.append(svg("line", { class: v ? "grid" : "axis", x1: left, x2: width - right, y1: y(v), y2: y(v) }),
        svg("text", { class: "tick", x: left - 4, y: y(v) + 4, "text-anchor": "end" }, fmt(v)));
    }
    ks.forEach((k) => root.append(svg("text", { class: "tick", x: x(k, (series.length - 1) / 2), y: height - 6, "text-anchor": "middle" }, "k=" + k)));
    series.forEach((s, i) => {
      const colour = COLOURS[i % COLOURS.length];
      const pts = s.points.filter((p) => typeof p.value === "number");
      if (pts.length > 1) {
        root.append(svg("polyline", { class: "line", stroke: colour, points: pts.map((p) => x(p.k, i) + "," + y(p.value)).join(" ") }));
      }
      for (const p of pts) {
        const g = svg("g", { class: "point" }, tip(s.name + " · k=" + p.k + ": " + fmt(p.value, 3) +
          (typeof p.low === "number" ? " [" + fmt(p.low, 3) + ", " + fmt(p.high, 3) + "]" : "")));
        if (typeof p.low === "number") g.append(svg("line", { class: "whisker", stroke: colour, x1: x(p.k, i), x2: x(p.k, i), y1: y(p.low), y2: y(p.high) }));
        g.append(svg("circle", { cx: x(p.k, i), cy: y(p.value), r: 3.5, fill: colour }));
        root.append(g);
      }
    });
    const fig = figure(id, title, root, null);
    const legend = document.createElement("div");
    legend.className = "legend";
    series.forEach((s, i) => {
      const key = document.createElement("span");
      key.className = "key";
      const swatch = svg("svg", { class: "chart swatch", width: 10, height: 10 }, svg("rect", { width: 10, height: 10, fill: COLOURS[i % COLOURS.length] }));
      key.append(swatch, document.createTextNode(" " + s.name));
      legend.append(key);
    });
    fig.append(legend);
    return fig;
  }

  // Horizontal bars of values in [0, 1], one per item ({label, value, note}).
  function bars(id, title, items) {
    const row = 16, labelW = 190, barW = 220, width = labelW + barW + 60, top = 4;
    const height = top + items.length * row + 4;
    const root = svg("svg", { class: "chart", viewBox: "0 0 " + width + " " + height, width: width, height: height, role: "img" });
    root.append(tip(title));
    items.forEach((item, i) => {
      const yy = top + i * row;
      const v = typeof item.value === "number" ? Math.max(0, Math.min(1, item.value)) : 0;
      root.append(svg("g", { class: "row" }, tip(item.label + ": " + item.note),
        svg("text", { class: "label", x: labelW - 6, y: yy + 12, "text-anchor": "end" }, short(item.label, 30)),
        svg("rect", { class: "track", x: labelW, y: yy + 2, width: barW, height: row - 4 }),
        svg("rect", { class: "bar", x: labelW, y: yy + 2, width: v * barW, height: row - 4 }),
        svg("text", { class: "tick", x: labelW + barW + 6, y: yy + 12 }, item.note)));
    });
    return figure(id, title, root, null);
  }

  window.CorralCharts = { histogram: histogram, byK: byK, bars: bars };
})();
