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

// The grid's bulk actions (its owner): tick images (or the whole page), then move them to a split or remove them,
// through the images API's bulk routes (PATCH / DELETE /api/images/bulk), label them (the editor in their label
// queue: ?sel=) or make a new dataset of them (selection_pages); after a move or a removal the page reloads,
// or, for a grid with data-refresh (the map page's, map.js), that grid is fetched again in place and
// "lanner:images-changed" is sent for the page to follow. Delegated: htmx swaps the grid (and with it the
// selection) on every filter and page.
(function () {
  'use strict';

  function selected() {
    return Array.prototype.map.call(document.querySelectorAll('#ds-grid .ds-select:checked'),
                                    function (box) { return box.value; });
  }

  function refresh() {
    const ids = selected();
    const count = document.getElementById('ds-bulk-count');
    if (!count) { return; }
    count.textContent = ids.length ? ids.length + ' selected' : 'None selected';
    document.getElementById('ds-bulk-move').disabled = !ids.length;
    document.getElementById('ds-bulk-delete').disabled = !ids.length;
    // Label / new dataset: the ticked images, else the whole lasso selection the grid shows (if any)
    const lasso = document.getElementById('ds-bulk').dataset.selectionCount;
    const label = document.getElementById('ds-bulk-label'), clone = document.getElementById('ds-bulk-clone');
    const adopt = document.getElementById('ds-bulk-adopt');
    label.disabled = clone.disabled = !ids.length && !lasso;
    if (adopt) {
      adopt.disabled = !ids.length && !lasso;
      adopt.textContent = ids.length ? 'Add ' + ids.length + ' selected to' : lasso ? 'Add these ' + lasso + ' to' : 'Add selected to';
    }
    label.textContent = ids.length ? 'Label ' + ids.length + ' selected' : lasso ? 'Label these ' + lasso : 'Label selected';
    clone.textContent = ids.length ? 'New dataset from ' + ids.length + ' selected'
      : lasso ? 'New dataset from these ' + lasso : 'New dataset from selected';
  }

  // The selection to label, copy or add elsewhere: the ticked images stored as one (the map's POST .../map/selection), else the
  // lasso's the grid is filtered by.
  function selection(ids) {
    const bulk = document.getElementById('ds-bulk');
    if (!ids.length) { return Promise.resolve(bulk.dataset.selection); }
    const keys = ids.map(function (id) { return id.slice(id.lastIndexOf('-') + 1); });
    return lanner.fetch(bulk.dataset.base + '/map/selection', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                                              body: JSON.stringify({keys: keys})})
      .then(function (response) {
        return response.json().then(function (answer) {
          if (!response.ok) { throw new Error(answer.error || 'The selection could not be kept.'); }
          return answer.id;
        });
      });
  }

  function withSelection(ids, then) {
    selection(ids).then(function (id) { if (id) { then(id); } })
      .catch(function (error) { lanner.showMessage(error.message, 'error'); });
  }

  function send(method, body, done) {
    lanner.fetch('/api/images/bulk', {method: method, headers: {'Content-Type': 'application/json'},
                                      body: JSON.stringify(body)})
      .then(function (response) {
        return response.json().then(function (answer) {
          if (!response.ok) { throw new Error(answer.error || 'The images could not be changed.'); }
          return answer;
        });
      })
      .then(done)
      .catch(function (error) { lanner.showMessage(error.message, 'error'); });
  }

  function changed() {
    const grid = document.getElementById('ds-grid');
    if (!grid || !grid.dataset.refresh || !window.htmx) { window.location.reload(); return; }
    htmx.ajax('GET', grid.dataset.refresh, {target: '#ds-grid', swap: 'outerHTML'}).then(function () {
      document.getElementById('ds-grid').dataset.refresh = grid.dataset.refresh;
      document.dispatchEvent(new CustomEvent('lanner:images-changed'));
    });
  }

  document.addEventListener('change', function (event) {
    if (event.target.classList && event.target.classList.contains('ds-select')) { refresh(); }
  });
  document.addEventListener('click', function (event) {
    if (event.target.id === 'ds-bulk-page') {
      const boxes = document.querySelectorAll('#ds-grid .ds-select');
      const all = Array.prototype.every.call(boxes, function (box) { return box.checked; });
      boxes.forEach(function (box) { box.checked = !all; });
      refresh();
      return;
    }
    const ids = selected();
    if (event.target.id === 'ds-bulk-label') {
      const base = document.getElementById('ds-bulk').dataset.base;
      withSelection(ids, function (id) { window.location.assign(base + '/annotate?sel=' + encodeURIComponent(id)); });
      return;
    }
    if (event.target.id === 'ds-bulk-clone') {
      withSelection(ids, function (id) {
        const form = document.getElementById('ds-bulk-clone-form');
        form.elements.sel.value = id;
        form.submit();
      });
      return;
    }
    if (event.target.id === 'ds-bulk-adopt') {
      withSelection(ids, function (id) {
        const form = document.getElementById('ds-bulk-adopt-form');
        form.elements.sel.value = id;
        form.submit();
      });
      return;
    }
    if (!ids.length) { return; }
    if (event.target.id === 'ds-bulk-move') {
      const split = document.getElementById('ds-bulk-split').value;
      send('PATCH', {imageIds: ids, split: split}, changed);
    } else if (event.target.id === 'ds-bulk-delete') {
      if (!window.confirm('Remove ' + ids.length + ' image' + (ids.length === 1 ? '' : 's') + ' from the dataset?')) {
        return;
      }
      send('DELETE', {imageIds: ids}, changed);
    }
  });
})();
