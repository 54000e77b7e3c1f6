// The train dialog's cost-versus-time chart: every GPU type as a point, the Pareto front as a line. It is drawn
// on load and again whenever htmx swaps in a new estimate (data-chart on #cost-chart holds the columns).
(function () {
  'use strict';

  function time(hours) {
    return hours == null ? '' : (hours < 1 ? (hours * 60).toFixed(0) + ' min' : hours.toFixed(1) + ' h');
  }

  function dollars(value) { return value == null ? '' : '$' + value.toFixed(2); }

  function draw(container) {
    const data = JSON.parse(container.dataset.chart);
    if (!data.x.length) { return; }
    const accent = lanner.cssColor('--accent', '#2456d6');
    const ok = lanner.cssColor('--ok', '#1a7f37');
    const axis = lanner.chartAxis();
    const width = function () { return Math.max(container.clientWidth, 200); };
    const options = {
      width: width(), height: 260,
      legend: {show: true},
      scales: {x: {time: false}, y: {range: function (u, min, max) { return [0, max > 0 ? max * 1.15 : 1]; }}},
      axes: [Object.assign({}, axis, {label: 'Total time (hours)', values: function (u, t) { return t.map(time); }}),
             Object.assign({}, axis, {label: 'Cost', size: 64, values: function (u, t) { return t.map(dollars); }})],
      series: [
        {label: 'GPU', value: function (u, v, si, i) { return i == null ? '' : data.names[i] + ', ' + time(v); }},
        {label: 'Cost', stroke: accent, width: 0, paths: function () { return null; },
         points: {show: true, size: 8, fill: accent}, value: function (u, v) { return dollars(v); }},
        {label: 'Pareto front', stroke: ok, width: 2, spanGaps: true,
         points: {show: true, size: 10, stroke: ok, fill: ok}, value: function (u, v) { return dollars(v); }},
      ],
    };
    container.textContent = '';
    const chart = new uPlot(options, [data.x, data.cost, data.front], container);
    new ResizeObserver(function () { chart.setSize({width: width(), height: 260}); }).observe(container);
  }

  function drawAll() {
    const container = document.getElementById('cost-chart');
    if (container && window.uPlot) { draw(container); }
  }

  document.addEventListener('DOMContentLoaded', drawAll);
  document.addEventListener('htmx:afterSettle', drawAll);
})();
