/* foxhunt report renderer: draws the charts listed in #foxhunt-report-data with uPlot.
   Progress is written to <html>: data-charts-rendered (charts drawn at least once),
   data-errors (set by errors.js) and data-report-ready (this script ran to the end). */
(function () {
  "use strict";
  var root = document.documentElement;
  var report = window.__foxhuntError || function (m) { root.setAttribute("data-errors", String(m)); };
  var MINUS = "\u2212", DASH = "\u2014";
  var D = JSON.parse(document.getElementById("foxhunt-report-data").textContent);
  var TIME = D.time || {};
  var drawn = {};
  var plots = [];
  var syncing = false;

  function markDrawn(id) {
    if (!drawn[id]) {
      drawn[id] = true;
      root.setAttribute("data-charts-rendered", String(Object.keys(drawn).length));
    }
  }

  // ---- numbers -------------------------------------------------------------------------
  function fixed(v, d) {
    return v.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }).replace("-", MINUS);
  }
  function decimalsFor(incr) {
    // Fewest decimals that write the tick increment exactly (0.25 -> 2, 2.5 -> 1, 500 -> 0).
    if (!(incr > 0) || !isFinite(incr)) return 2;
    for (var d = 0; d < 6; d++) {
      var x = incr * Math.pow(10, d);
      if (Math.abs(x - Math.round(x)) < 1e-6 * Math.max(1, x)) return d;
    }
    return 6;
  }
  function axisNumber(v, incr, maxAbs) {
    if (maxAbs >= 1e6) return fixed(v / 1e6, decimalsFor(incr / 1e6)) + "M";
    if (maxAbs >= 1e4) return fixed(v / 1e3, decimalsFor(incr / 1e3)) + "k";
    return fixed(v, decimalsFor(incr));
  }
  function legendNumber(v) {
    var a = Math.abs(v);
    if (a === 0) return "0";
    if (a >= 100) return fixed(v, 2);
    return v.toPrecision(4).replace("-", MINUS);
  }
  var FORMATS = {
    money: { axis: axisNumber, legend: function (v) { return fixed(v, 2); } },
    price: { axis: axisNumber, legend: function (v) { return fixed(v, 2); } },
    num: { axis: axisNumber, legend: legendNumber },
    pct: {
      axis: function (v, incr) { return fixed(v * 100, decimalsFor(incr * 100)) + "%"; },
      legend: function (v) { return fixed(v * 100, 2) + "%"; }
    }
  };

  // ---- time ----------------------------------------------------------------------------
  function timeAt(group, i) {
    var seg = TIME[group];
    if (!seg || !seg.length || i == null) return null;
    var lo = 0, hi = seg.length - 1;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (seg[mid][0] <= i) lo = mid; else hi = mid - 1;
    }
    var s = seg[lo];
    return s[1] + (i - s[0]) * s[2];
  }
  function fmtTime(ms, mode) {
    if (ms == null || !isFinite(ms)) return "";
    var t = new Date(ms).toISOString();
    if (mode === "date") return t.slice(0, 10);
    if (mode === "datetime") return t.slice(5, 10) + "\n" + t.slice(11, 16);
    return t.slice(0, 10) + " " + t.slice(11, 16) + " UTC";
  }

  // ---- trade markers -------------------------------------------------------------------
  function markersPlugin(m) {
    function tri(ctx, x, y, s, up) {
      ctx.beginPath();
      if (up) { ctx.moveTo(x, y - s); ctx.lineTo(x + s, y + s * 0.8); ctx.lineTo(x - s, y + s * 0.8); }
      else { ctx.moveTo(x, y + s); ctx.lineTo(x + s, y - s * 0.8); ctx.lineTo(x - s, y - s * 0.8); }
      ctx.closePath();
      ctx.fill();
      ctx.stroke();
    }
    return {
      hooks: {
        draw: [function (u) {
          var ctx = u.ctx, b = u.bbox, px = uPlot.pxRatio || 1, s = 4.5 * px, k, x, y;
          ctx.save();
          ctx.beginPath();
          ctx.rect(b.left, b.top, b.width, b.height);
          ctx.clip();
          function each(xi, xp, width, stroke, mark) {  // mark(x, y, k) at each marker in view
            ctx.lineWidth = width * px;
            ctx.strokeStyle = stroke;
            for (k = 0; k < xi.length; k++) {
              x = u.valToPos(xi[k], "x", true);
              y = u.valToPos(xp[k], "y", true);
              if (x < b.left - s || x > b.left + b.width + s) continue;
              mark(x, y, k);
            }
          }
          each(m.xi, m.xp, 1.6, "#334155", function (x, y) {
            ctx.beginPath();
            ctx.moveTo(x - s * 0.75, y - s * 0.75); ctx.lineTo(x + s * 0.75, y + s * 0.75);
            ctx.moveTo(x + s * 0.75, y - s * 0.75); ctx.lineTo(x - s * 0.75, y + s * 0.75);
            ctx.stroke();
          });
          each(m.ei, m.ep, 1, "#ffffff", function (x, y, k) {
            ctx.fillStyle = m.es[k] === 1 ? "#16a34a" : "#dc2626";
            tri(ctx, x, y, s, m.es[k] === 1);
          });
          ctx.restore();
        }]
      }
    };
  }

  // ---- one chart -----------------------------------------------------------------------
  function build(spec) {
    var el = document.getElementById(spec.id);
    var f = FORMATS[spec.fmt] || FORMATS.num;
    var isBar = spec.xkind === "bar";
    var n = spec.x.length;
    var mode = "date";
    if (isBar && n) {
      var span = timeAt(spec.group, spec.x[n - 1]) - timeAt(spec.group, spec.x[0]);
      mode = span > 45 * 86400000 ? "date" : "datetime";
    }
    var maxAbs = 0;
    spec.series.forEach(function (s) {
      for (var i = 0; i < s.y.length; i++) if (s.y[i] != null && Math.abs(s.y[i]) > maxAbs) maxAbs = Math.abs(s.y[i]);
    });
    var series = [{
      label: isBar ? "Time" : (spec.xlabel || "Epoch"),
      value: function (u, v) {
        if (v == null) return DASH;
        return isBar ? fmtTime(timeAt(spec.group, Math.round(v)), "full") : String(v);
      }
    }];
    var data = [spec.x];
    spec.series.forEach(function (s, k) {
      var o = {
        label: s.label, stroke: s.color, width: s.width || 1.5, spanGaps: !isBar,
        value: function (u, v, si, idx) {
          if (spec.kind === "mix") {
            if (idx == null) return DASH;
            var top = u.data[si][idx], below = si < 3 ? u.data[si + 1][idx] : 0;
            return top == null ? DASH : f.legend(top - (below || 0));
          }
          return v == null ? DASH : f.legend(v);
        }
      };
      if (isBar) o.points = n < 3 ? { show: true, size: 7 } : { show: false };
      if (s.markers) { o.points = { show: true, size: 7, fill: s.color }; o.paths = function () { return null; }; }
      if (s.fill) o.fill = s.fill;
      if (s.dash) o.dash = s.dash;
      series.push(o);
      data.push(s.y);
    });
    var yRange = spec.kind === "mix" ? [0, 1] : function (u, min, max) {
      if (min == null || max == null || !isFinite(min) || !isFinite(max)) return [0, 1];
      if (spec.ymax0) max = Math.max(max, 0);
      if (min === max) {
        if (spec.ymax0) return [Math.min(min, 0) - 0.01, 0];
        var p = Math.abs(min) * 0.01 || 1;
        return [min - p, max + p];
      }
      var pad = (max - min) * 0.05;
      return [min - pad, spec.ymax0 ? max : max + pad];
    };
    var axisStyle = {
      stroke: "#475569", font: "11px system-ui, sans-serif",
      grid: { stroke: "#edf1f6", width: 1 }, ticks: { stroke: "#e2e8f0", width: 1, size: 4 }
    };
    var xAxis = Object.assign({}, axisStyle, {
      space: isBar ? 90 : 40,
      size: isBar && mode === "datetime" ? 46 : 32,
      values: function (u, splits) {
        return splits.map(function (v) {
          if (v == null) return "";
          if (!Number.isInteger(v)) return "";
          if (!isBar) return String(v);
          if (v < spec.x[0] || v > spec.x[n - 1]) return "";
          return fmtTime(timeAt(spec.group, v), mode);
        });
      }
    });
    if (!isBar) xAxis.incrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];
    var yAxis = Object.assign({}, axisStyle, {
      size: 62,
      values: function (u, splits, ai, space, incr) {
        return splits.map(function (v) { return v == null ? "" : f.axis(v, incr, maxAbs); });
      }
    });
    var opts = {
      width: Math.max(240, el.clientWidth),
      height: spec.height,
      series: series,
      scales: {
        x: {
          time: false,
          range: function (u, min, max) { return min === max ? [min - 1, max + 1] : [min, max]; }
        },
        y: { range: yRange }
      },
      axes: [xAxis, yAxis],
      legend: { live: true },
      cursor: { drag: { x: true, y: false }, points: { size: 6 } },
      plugins: spec.markers ? [markersPlugin(spec.markers)] : [],
      hooks: {
        draw: [function () { markDrawn(spec.id); }],
        setScale: [function (u, key) {
          if (key !== "x" || syncing || !u.__group) return;
          syncing = true;
          try {
            plots.forEach(function (p) {
              if (p !== u && p.__group === u.__group) p.setScale("x", { min: u.scales.x.min, max: u.scales.x.max });
            });
          } finally { syncing = false; }
        }]
      }
    };
    if (spec.group) opts.cursor.sync = { key: spec.group };
    el.style.minHeight = "";
    var u = new uPlot(opts, data, el);
    u.__group = spec.group;
    u.__el = el;
    plots.push(u);
  }

  D.charts.forEach(function (spec) {
    try {
      build(spec);
    } catch (err) {
      report("chart " + spec.id + ": " + (err && err.message ? err.message : err));
      var el = document.getElementById(spec.id);
      if (el) { el.className += " chart-error"; el.textContent = "This chart could not be drawn: " + err; }
    }
  });

  var timer = null;
  window.addEventListener("resize", function () {
    clearTimeout(timer);
    timer = setTimeout(function () {
      plots.forEach(function (u) {
        var w = Math.max(240, u.__el.clientWidth);
        if (w !== u.width) u.setSize({ width: w, height: u.height });
      });
    }, 120);
  });
  root.setAttribute("data-report-ready", "1");
})();
