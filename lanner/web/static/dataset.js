// The dataset page's class distribution: uPlot bars of labels per class (data-chart on #class-chart).
(function () {
  'use strict';

  function draw(container) {
    const data = JSON.parse(container.dataset.chart);
    const xs = data.names.map(function (_, i) { return i; });
    const accent = lanner.cssColor('--accent', '#2456d6');
    const axis = lanner.chartAxis();
    const options = {
      width: container.clientWidth,
      height: 200,
      cursor: {points: {show: false}},
      legend: {show: false},
      scales: {x: {time: false, range: function () { return [-0.5, xs.length - 0.5]; }},
               y: {range: function (u, min, max) { return [0, max > 0 ? max * 1.15 : 1]; }}},
      axes: [
        Object.assign({}, axis, {splits: function () { return xs; },
                                 values: function (u, ticks) { return ticks.map(function (t) { return data.names[t] || ''; }); }}),
        Object.assign({}, axis, {size: 50}),
      ],
      series: [
        {label: 'Class'},
        {label: 'Labels', stroke: accent, fill: accent + 'b3', width: 0,
         paths: uPlot.paths.bars({size: [0.6, 60]}), points: {show: false}},
      ],
    };
    const chart = new uPlot(options, [xs, data.counts], container);
    new ResizeObserver(function () { chart.setSize({width: container.clientWidth, height: 200}); }).observe(container);
  }

  document.addEventListener('DOMContentLoaded', function () {
    const container = document.getElementById('class-chart');
    if (container && window.uPlot) { draw(container); }
  });
})();
