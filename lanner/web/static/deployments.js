// The model page's endpoints (lanner/web/deploy_pages.py): a latency chart per deployment (uPlot, redrawn after
// each htmx refresh of the table), the "try it" choices kept to the ready endpoints, and "try it" itself: the
// image goes to the endpoint's own predict (the API, with the session and its CSRF token), and the answer's
// boxes, oriented boxes, masks (polygons) and keypoints are drawn over the image on a canvas.
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

  function label(ctx, text, x, y, color) {
    ctx.font = '600 13px system-ui, sans-serif';
    const width = ctx.measureText(text).width + 8;
    ctx.fillStyle = color;
    ctx.fillRect(x, Math.max(0, y - 18), width, 18);
    ctx.fillStyle = '#fff';
    ctx.fillText(text, x + 4, Math.max(13, y - 5));
  }

  function polygon(ctx, xs, ys) {
    ctx.beginPath();
    xs.forEach(function (x, i) { if (i) { ctx.lineTo(x, ys[i]); } else { ctx.moveTo(x, ys[i]); } });
    ctx.closePath();
  }

  // Rows in image pixels (normalize=false): box {x1,y1,x2,y2} or four corners (OBB), segments {x,y}, keypoints.
  function drawResults(ctx, results) {
    let shapes = 0;
    results.forEach(function (row) {
      const color = PALETTE[(row['class'] || 0) % PALETTE.length];
      const text = row.name + (row.confidence !== undefined ? ' ' + row.confidence.toFixed(2) : '');
      ctx.lineWidth = 2;
      ctx.strokeStyle = color;
      if (row.segments && row.segments.x && row.segments.x.length) {
        polygon(ctx, row.segments.x, row.segments.y);
        ctx.globalAlpha = 0.35;
        ctx.fillStyle = color;
        ctx.fill();
        ctx.globalAlpha = 1;
        ctx.stroke();
      }
      const b = row.box;
      if (b && b.x4 !== undefined) {
        polygon(ctx, [b.x1, b.x2, b.x3, b.x4], [b.y1, b.y2, b.y3, b.y4]);
        ctx.stroke();
        label(ctx, text, Math.min(b.x1, b.x2, b.x3, b.x4), Math.min(b.y1, b.y2, b.y3, b.y4), color);
        shapes += 1;
      } else if (b) {
        ctx.strokeRect(b.x1, b.y1, b.x2 - b.x1, b.y2 - b.y1);
        label(ctx, text, b.x1, b.y1, color);
        shapes += 1;
      }
      if (row.keypoints && row.keypoints.x) {
        ctx.fillStyle = color;
        row.keypoints.x.forEach(function (x, i) {
          if ((row.keypoints.visible || [])[i] >= 0.5) { ctx.beginPath(); ctx.arc(x, row.keypoints.y[i], 3, 0, 2 * Math.PI); ctx.fill(); }
        });
      }
    });
    return shapes;
  }

  // The image is decoded from the chosen file itself (createImageBitmap): no blob: URL, which the page's
  // Content-Security-Policy (default-src 'self') would refuse to load.
  function show(file, answer, elapsed) {
    const canvas = document.getElementById('try-canvas');
    const summary = document.getElementById('try-summary');
    return createImageBitmap(file, {imageOrientation: 'from-image'}).then(function (image) {
      canvas.width = image.width;
      canvas.height = image.height;
      const ctx = canvas.getContext('2d');
      ctx.drawImage(image, 0, 0);
      image.close();
      const entry = answer.images[0] || {results: []};
      const shapes = drawResults(ctx, entry.results);
      canvas.hidden = false;
      canvas.dataset.boxes = shapes;
      canvas.dataset.results = entry.results.length;
      const top = entry.results.slice(0, 5).map(function (r) {
        return r.name + (r.confidence !== undefined ? ' ' + r.confidence.toFixed(2) : '');
      });
      summary.textContent = entry.results.length + ' result' + (entry.results.length === 1 ? '' : 's') + ' in ' +
        Math.round(elapsed) + ' ms (' + answer.metadata.task + ')' + (top.length ? ': ' + top.join(', ') : '');
    });
  }

  function tryIt(form) {
    form.addEventListener('submit', function (event) {
      event.preventDefault();
      const api = document.getElementById('try-deployment').value;
      const file = document.getElementById('try-file').files[0];
      if (!api || !file) { lanner.showMessage('Pick a ready endpoint and an image first.', 'error'); return; }
      const body = new FormData();
      body.append('file', file);
      body.append('conf', document.getElementById('try-conf').value || '0.25');
      const started = performance.now();
      const button = document.getElementById('try-run');
      button.disabled = true;
      lanner.fetch(api + '/predict', {method: 'POST', body: body}).then(function (response) {
        return response.json().then(function (answer) {
          if (!response.ok) { throw new Error(answer.error || ('Request failed (' + response.status + ').')); }
          return show(file, answer, performance.now() - started);
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
