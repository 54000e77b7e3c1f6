// The train dialog's cost-against-time chart: every GPU type as a point (those that run here in the accent colour,
// the others muted), the Pareto front as a line. The server chooses the time unit and the ticks (distinct, each
// with its unit) and writes the legend with values; hovering a point names it below the chart. Drawn on load and
// again whenever htmx swaps in a new estimate (data-chart on #cost-chart holds everything).
(function () {
  'use strict';

  function labelled(ticks, labels) {
    return {
      splits: function () { return ticks; },
      values: function (u, splits) { return splits.map(function (v, i) { return labels[i]; }); },
    };
  }

  function draw(container) {
    const data = JSON.parse(container.dataset.chart);
    if (!data.x.length) { return; }
    const accent = lanner.cssColor('--accent', '#2456d6');
    const muted = lanner.cssColor('--muted', '#5b6475');
    const ok = lanner.cssColor('--ok', '#1a7f37');
    const readout = document.getElementById('chart-readout');
    const width = function () { return Math.max(container.clientWidth, 200); };
    const xMax = data.xTicks[data.xTicks.length - 1];
    const yMax = data.yTicks[data.yTicks.length - 1];
    const options = {
      width: width(), height: 260, padding: [12, 32, 0, 0],  // room for the last tick's label
      legend: {show: false},  // the server's legend (#chart-legend) has the values; the readout names a point
      scales: {x: {time: false, range: function () { return [0, xMax]; }},
               y: {range: function () { return [0, yMax]; }}},
      axes: [Object.assign(lanner.chartAxis(), {label: data.xLabel}, labelled(data.xTicks, data.xLabels)),
             Object.assign(lanner.chartAxis(), {label: data.yLabel, size: 64}, labelled(data.yTicks, data.yLabels))],
      series: [
        {},
        {label: 'Runs here', stroke: accent, width: 0, paths: function () { return null; },
         points: {show: true, size: 10, fill: accent}},
        {label: 'Not available here', stroke: muted, width: 0, paths: function () { return null; },
         points: {show: true, size: 6, fill: muted}},
        {label: 'Pareto front', stroke: ok, width: 2, spanGaps: true,
         points: {show: true, size: 12, stroke: ok, width: 2, fill: 'transparent'}},
      ],
      hooks: {setCursor: [function (u) {
        if (readout) { readout.textContent = u.cursor.idx == null ? '' : data.points[u.cursor.idx]; }
      }]},
    };
    container.textContent = '';
    const chart = new uPlot(options, [data.x, data.here, data.elsewhere, data.front], container);
    new ResizeObserver(function () { chart.setSize({width: width(), height: 260}); }).observe(container);
  }

  function drawAll() {
    const container = document.getElementById('cost-chart');
    if (container && window.uPlot) { draw(container); }
  }

  document.addEventListener('DOMContentLoaded', drawAll);
  document.addEventListener('htmx:afterSettle', drawAll);
})();
