// The account page's spend chart: uPlot bars of spend per day (data-chart on #spend-chart holds the columns).
(function () {
  'use strict';

  function dollars(value) {
    if (value == null) { return ''; }
    // As the server's money filter: whole cents, and "<$0.01" for a day of a few seconds' charges.
    return value > 0 && value < 0.01 ? '<$0.01' : '$' + value.toFixed(2);
  }

  // Axis labels: cents, or finer when the largest day is under a dime (per-second billing makes such days).
  function axisDollars(ticks, max) {
    const digits = max < 0.1 ? 4 : 2;
    return ticks.map(function (t) { return '$' + t.toFixed(digits); });
  }

  function draw(container) {
    const data = JSON.parse(container.dataset.chart);
    const accent = lanner.cssColor('--accent', '#2456d6');
    const axis = lanner.chartAxis();
    const options = {
      width: container.clientWidth,
      height: 240,
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'); },  // days are UTC days
      cursor: {points: {show: false}},
      legend: {show: true},
      scales: {x: {time: true, range: function (u, min, max) { return [min - 43200, max + 43200]; }}, y: {range: function (u, min, max) { return [0, max > 0 ? max * 1.15 : 1]; }}},
      axes: [
        Object.assign({}, axis),
        Object.assign({}, axis, {size: 72, values: function (u, ticks) { return axisDollars(ticks, u.scales.y.max); }}),
      ],
      series: [
        {label: 'Day', value: '{YYYY}-{MM}-{DD}'},
        {label: 'Spend', stroke: accent, fill: accent + 'b3', width: 0,
         paths: uPlot.paths.bars({size: [0.7, 40]}), points: {show: false},
         value: function (u, v) { return dollars(v); }},
      ],
    };
    const chart = new uPlot(options, [data.x, data.spend], container);
    new ResizeObserver(function () {
      chart.setSize({width: container.clientWidth, height: 240});
    }).observe(container);
  }

  document.addEventListener('DOMContentLoaded', function () {
    const container = document.getElementById('spend-chart');
    if (container && window.uPlot) { draw(container); }
  });
})();
