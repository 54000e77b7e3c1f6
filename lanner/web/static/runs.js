// Compare and model pages (lanner/web/project_pages.py): overlaid curves, and the
// model page's live run (curves redrawn, console lines appended, status, system metrics and history refreshed
// from each "lanner:live" event that live.js fires).
(function () {
  'use strict';

  const PALETTE = ['#2456d6', '#d6462f', '#1f9d55', '#b7791f', '#805ad5', '#0f8f9f', '#c53f83', '#5b6475'];

  // Epoch charts by default; ``x`` ({label}) for the trainer's final curves, whose x runs from 0 to 1.
  function chart(container, series, columns, x) {
    const axis = lanner.chartAxis();
    const xAxis = x ? {label: x.label} : {incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]};
    const options = {
      width: container.clientWidth, height: 200, legend: {show: true},
      scales: {x: {time: false}}, axes: [Object.assign({}, axis, xAxis), Object.assign({}, axis, {size: 56})],
      series: [{label: x ? x.label : 'Epoch'}].concat(series.map(function (s, i) {
        return {label: s.label, stroke: s.color || PALETTE[i % PALETTE.length], width: x && i ? 1 : 2, dash: s.dash,
                spanGaps: true, points: {show: !x, size: 4}};
      })),
    };
    const plot = new uPlot(options, columns, container);
    new ResizeObserver(function () { plot.setSize({width: container.clientWidth, height: 200}); }).observe(container);
    return plot;
  }

  // --- compare: one chart per metric, one series per model ---------------------------------------------------
  function comparePage(section) {
    const runs = JSON.parse(section.dataset.compare);
    section.querySelectorAll('[data-metric]').forEach(function (container) {
      const metric = container.dataset.metric;
      const xs = Array.from(new Set([].concat.apply([], runs.map(function (r) { return r.x; })))).sort(function (a, b) { return a - b; });
      const columns = [xs].concat(runs.map(function (r) {
        const byEpoch = {};
        r.x.forEach(function (x, i) { byEpoch[x] = r[metric][i]; });
        return xs.map(function (x) { return byEpoch[x] === undefined ? null : byEpoch[x]; });
      }));
      chart(container, runs.map(function (r) { return {label: r.name}; }), columns);
    });
  }

  // --- model: live curves, console, status, system, history --------------------------------------------------
  function modelPage(root) {
    const state = JSON.parse(root.dataset.state);
    const lossChart = chart(document.getElementById('chart-loss'),
      [{label: 'train loss'}, {label: 'val loss', dash: [6, 4]}], lossColumns(state.curves));
    const metricChart = chart(document.getElementById('chart-metrics'),
      [{label: 'mAP50-95'}, {label: 'mAP50'}, {label: 'precision'}, {label: 'recall'}], metricColumns(state.curves));
    markPoints(state.curves);
    const consoleBox = document.getElementById('console');
    let lastChunk = state.console.length ? state.console[state.console.length - 1].id : -Infinity;

    root.addEventListener('lanner:live', function (event) {
      const data = event.detail;
      if (data.gone) { return; }
      lossChart.setData(lossColumns(data.curves));
      metricChart.setData(metricColumns(data.curves));
      markPoints(data.curves);
      const atBottom = consoleBox.scrollTop + consoleBox.clientHeight >= consoleBox.scrollHeight - 4;
      data.console.forEach(function (chunk) {
        if (chunk.id <= lastChunk) { return; }
        const span = document.createElement('span');
        span.dataset.chunk = chunk.id;
        span.textContent = chunk.text;
        consoleBox.appendChild(span);
        lastChunk = chunk.id;
      });
      if (atBottom) { consoleBox.scrollTop = consoleBox.scrollHeight; }
      const badge = document.getElementById('model-status');
      badge.className = 'badge badge-' + data.status;
      const cancel = document.getElementById('cancel-form');
      if (cancel && !data.active) { cancel.hidden = true; }
      // A run that ended while the page was open: its weights, plots, Preview and Export come with a reload.
      if (state.active && !data.active) { document.getElementById('run-ended').hidden = false; }
      const system = document.getElementById('system-metrics');
      const keys = Object.keys(data.system);
      if (keys.length) {
        system.replaceChildren.apply(system, [].concat.apply([], keys.map(function (k) {
          const dt = document.createElement('dt'); dt.textContent = k;
          const dd = document.createElement('dd'); dd.textContent = data.system[k];
          return [dt, dd];
        })));
      }
      const history = document.querySelector('#run-history tbody');
      if (history && data.history.length > history.rows.length) {
        data.history.slice(history.rows.length).forEach(function (e) {
          const row = history.insertRow();
          [e.at, e.from || '', e.to, e.reason || ''].forEach(function (v) { row.insertCell().textContent = v; });
        });
      }
    });
    consoleBox.scrollTop = consoleBox.scrollHeight;
  }

  // How many epochs each chart shows (for people's tools and tests: the canvas itself says nothing).
  function markPoints(c) {
    ['chart-loss', 'chart-metrics'].forEach(function (id) { document.getElementById(id).dataset.points = c.x.length; });
  }

  function lossColumns(c) { return [c.x, c.loss, c.val_loss]; }
  function metricColumns(c) { return [c.x, c.map, c.map50, c.precision, c.recall]; }

  function plots() {
    document.querySelectorAll('[data-plot]').forEach(function (container) {
      const plot = JSON.parse(container.dataset.plot);
      // Server-checked (training/dashboard.final_plots): one x column and named y series of the same length.
      chart(container, plot.series.map(function (s, i) { return {label: s.label, dash: i ? [4, 3] : undefined}; }),
            [plot.x].concat(plot.series.map(function (s) { return s.y; })), {label: plot.xLabel});
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    if (!window.uPlot) { return; }
    const section = document.querySelector('[data-compare]');
    if (section) { comparePage(section); }
    const root = document.getElementById('model-live');
    if (root) { modelPage(root); plots(); }
  });
})();
