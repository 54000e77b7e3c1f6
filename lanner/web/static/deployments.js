// The model page's endpoints (lanner/web/deploy_pages.py): a latency chart per deployment (uPlot, redrawn after
// each htmx refresh of the table), the "try it" choices kept to the ready endpoints, and "try it" itself: the
// image goes to the endpoint's own predict (the API, with the session and its CSRF token), and the answer is drawn
// over the image on a canvas by predictions.js (boxes, oriented boxes, masks as polygons, keypoints).
(function () {
  'use strict';

  const PALETTE = ['#2456d6', '#d6462f', '#1f9d55', '#b7791f', '#805ad5', '#0f8f9f', '#c53f83', '#5b6475'];

  function drawCharts(root) {
    if (!window.uPlot) { return; }
    root.querySelectorAll('[data-latency]').forEach(function (container) {
      if (container.dataset.drawn) { return; }
      const c = JSON.parse(container.dataset.latency);
      const options = {
        width: container.clientWidth || 220, height: 80, legend: {show: false}, cursor: {show: true},
        scales: {x: {time: true}, y: {range: function (u, min, max) { return [0, Math.max(10, (max || 0) * 1.2)]; }}},
        axes: [lanner.chartAxis({show: false}), lanner.chartAxis({size: 64, values: function (u, v) {
          return v.map(function (ms) { return Math.round(ms) + ' ms'; });
        }})],
        series: [{}, {label: 'p50', stroke: lanner.cssColor('--info', PALETTE[0]), width: 1.5, points: {show: true, size: 5}},
                 {label: 'p95', stroke: lanner.cssColor('--warn', PALETTE[3]), width: 1.5, dash: [4, 3],
                  points: {show: true, size: 5}}],
      };
      new uPlot(options, [c.x, c.p50, c.p95], container);
      container.dataset.drawn = '1';
      container.dataset.points = c.p95.filter(function (v) { return v !== null; }).length;
    });
  }

  // The "try it" endpoint list follows the table: only ready endpoints can answer.
  function refreshChoices() {
    const select = document.getElementById('try-deployment');
    if (!select) { return; }
    const current = select.value;
    const ready = Array.from(document.querySelectorAll('#deployments tr[data-ready="true"]'));
    const options = ready.map(function (row) {
      const option = document.createElement('option');
      option.value = row.dataset.api;
      option.textContent = row.dataset.name;
      option.selected = row.dataset.api === current;
      return option;
    });
    select.replaceChildren.apply(select, options);
    document.getElementById('try-run').disabled = !options.length;
  }

  function tryIt(form) {
    form.addEventListener('submit', function (event) {
      event.preventDefault();
      const api = document.getElementById('try-deployment').value;
      const file = document.getElementById('try-file').files[0];
      if (!api || !file) { lanner.showMessage('Pick a ready endpoint and an image first.', 'error'); return; }
      const draw = window.lannerPredictions;
      const started = performance.now();
      const button = document.getElementById('try-run');
      button.disabled = true;
      draw.predict(api + '/predict', file, document.getElementById('try-conf').value).then(function (answer) {
        const elapsed = performance.now() - started;
        return draw.draw(document.getElementById('try-canvas'), file, answer).then(function (results) {
          document.getElementById('try-summary').textContent = draw.summary(results, answer, elapsed);
        });
      }).catch(function (error) {
        lanner.showMessage(error.message, 'error');
      }).finally(function () { button.disabled = false; });
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    drawCharts(document);
    refreshChoices();
    const form = document.getElementById('try-form');
    if (form) { tryIt(form); }
  });
  document.addEventListener('htmx:afterSettle', function () {
    drawCharts(document);
    refreshChoices();
  });
})();
