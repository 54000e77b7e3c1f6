// The GPU pools page's chart: per UTC day, the pools' cost to the operator and the credits charged (bars side by
// side) and the margin (a line). data-chart on #margin-chart holds the columns, in dollars.
(function () {
  'use strict';

  function dollars(value) {
    if (value == null) { return ''; }
    const sign = value < 0 ? '-' : '';
    const size = Math.abs(value);
    // As the server's money filter: whole cents, and "<$0.01" for a day of a few seconds' use.
    return size > 0 && size < 0.01 ? sign + '<$0.01' : sign + '$' + size.toFixed(2);
  }

  function axisDollars(ticks, span) {
    const digits = span < 0.1 ? 4 : 2;
    return ticks.map(function (t) { return (t < 0 ? '-$' : '$') + Math.abs(t).toFixed(digits); });
  }

  function draw(container) {
    const data = JSON.parse(container.dataset.chart);
    const cost = lanner.cssColor('--warn', '#8a5a00');
    const credits = lanner.cssColor('--accent', '#2456d6');
    const margin = lanner.cssColor('--ok', '#137333');
    const axis = lanner.chartAxis();
    const options = {
      width: container.clientWidth,
      height: 260,
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'); },  // days are UTC days
      cursor: {points: {show: false}},
      legend: {show: true},
      scales: {
        x: {time: true, range: function (u, min, max) { return [min - 43200, max + 43200]; }},
        y: {range: function (u, min, max) {
          const low = Math.min(0, min), high = Math.max(0, max);
          return high > low ? [low * 1.15, high * 1.15] : [0, 1];
        }},
      },
      axes: [
        Object.assign({}, axis),
        Object.assign({}, axis, {size: 72, label: 'USD per day', values: function (u, ticks) {
          return axisDollars(ticks, u.scales.y.max - u.scales.y.min);
        }}),
      ],
      series: [
        {label: 'Day (UTC)', value: '{YYYY}-{MM}-{DD}'},
        {label: 'Cost to you', stroke: cost, fill: cost + 'b3', width: 0,
         paths: uPlot.paths.bars({size: [0.35, 24], align: -1}), points: {show: false},
         value: function (u, v) { return dollars(v); }},
        {label: 'Credits charged', stroke: credits, fill: credits + 'b3', width: 0,
         paths: uPlot.paths.bars({size: [0.35, 24], align: 1}), points: {show: false},
         value: function (u, v) { return dollars(v); }},
        {label: 'Margin', stroke: margin, width: 2, points: {show: true, size: 5, fill: margin},
         value: function (u, v) { return dollars(v); }},
      ],
    };
    const chart = new uPlot(options, [data.x, data.cost, data.credits, data.margin], container);
    new ResizeObserver(function () {
      chart.setSize({width: container.clientWidth, height: 260});
    }).observe(container);
  }

  document.addEventListener('DOMContentLoaded', function () {
    const container = document.getElementById('margin-chart');
    if (container && window.uPlot) { draw(container); }
  });
})();
