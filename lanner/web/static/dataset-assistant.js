// The dataset page's assistant section (lanner/web/templates/_dataset_assistant.html): its quality per round as
// uPlot lines (mAP50 on the labelled validation images, and the share of proposals accepted unchanged), drawn
// from data-chart on #assistant-chart when the page loads and again when the settings form's answer replaces the
// section (htmx:load).
(function () {
  'use strict';

  function draw(container) {
    if (container.dataset.drawn) { return; }
    container.dataset.drawn = '1';
    const data = JSON.parse(container.dataset.chart);
    const axis = lanner.chartAxis();
    const options = {
      width: container.clientWidth, height: 180, legend: {show: true},
      scales: {x: {time: false}, y: {range: [0, 1]}},
      axes: [Object.assign({}, axis, {label: 'Round', incrs: [1, 2, 5, 10, 20, 50, 100]}),
             Object.assign({}, axis, {size: 48, values: function (u, ticks) {
               return ticks.map(function (t) { return Math.round(t * 100) + '%'; });
             }})],
      series: [
        {label: 'Round'},
        {label: 'mAP50', stroke: lanner.cssColor('--accent', '#2456d6'), width: 2, spanGaps: true,
         points: {show: true, size: 6}, value: function (u, v) { return v == null ? '—' : v.toFixed(3); }},
        {label: 'Accepted unchanged', stroke: lanner.cssColor('--ok', '#1f9d55'), width: 2, dash: [6, 4],
         spanGaps: true, points: {show: true, size: 6},
         value: function (u, v) { return v == null ? '—' : Math.round(v * 100) + '%'; }},
      ],
    };
    const plot = new uPlot(options, [data.rounds, data.map50, data.accepted], container);
    new ResizeObserver(function () { plot.setSize({width: container.clientWidth, height: 180}); }).observe(container);
  }

  function drawIn(root) {
    const container = root.id === 'assistant-chart' ? root : root.querySelector('#assistant-chart');
    if (container && window.uPlot) { draw(container); }
  }

  document.addEventListener('DOMContentLoaded', function () { drawIn(document.body); });
  document.addEventListener('htmx:load', function (event) { drawIn(event.detail.elt); });
})();
