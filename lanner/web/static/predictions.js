// A predict answer drawn over its image (the hosted PredictResponse, pixels: normalize=false): boxes, oriented
// boxes (four corners), mask polygons and keypoints in the class colours, each with its class and confidence.
// Shared by the model page's Preview (preview.js: shared inference) and an endpoint's "try it" (deployments.js).
(function () {
  'use strict';

  const PALETTE = ['#2456d6', '#d6462f', '#1f9d55', '#b7791f', '#805ad5', '#0f8f9f', '#c53f83', '#5b6475'];

  function colour(row) { return PALETTE[(row['class'] || 0) % PALETTE.length]; }

  function text(row) { return row.name + (row.confidence !== undefined ? ' ' + row.confidence.toFixed(2) : ''); }

  // ``k``: image pixels per screen pixel, so lines and labels look the same size whatever the image's size.
  function label(ctx, words, x, y, color, k) {
    ctx.font = '600 ' + (13 * k) + 'px system-ui, sans-serif';
    const width = ctx.measureText(words).width + 8 * k;
    ctx.fillStyle = color;
    ctx.fillRect(x, Math.max(0, y - 18 * k), width, 18 * k);
    ctx.fillStyle = '#fff';
    ctx.fillText(words, x + 4 * k, Math.max(13 * k, y - 5 * k));
  }

  function polygon(ctx, xs, ys) {
    ctx.beginPath();
    xs.forEach(function (x, i) { if (i) { ctx.lineTo(x, ys[i]); } else { ctx.moveTo(x, ys[i]); } });
    ctx.closePath();
  }

  // Returns how many boxes (plain or oriented) were drawn.
  // Shapes first, then every label over them (the most confident drawn last, on top). Returns how many boxes
  // (plain or oriented) were drawn.
  function drawResults(ctx, results, k) {
    const labels = [];
    results.forEach(function (row) {
      const color = colour(row);
      ctx.lineWidth = 2 * k;
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
        labels.push([row, Math.min(b.x1, b.x2, b.x3, b.x4), Math.min(b.y1, b.y2, b.y3, b.y4)]);
      } else if (b) {
        ctx.strokeRect(b.x1, b.y1, b.x2 - b.x1, b.y2 - b.y1);
        labels.push([row, b.x1, b.y1]);
      }
      if (row.keypoints && row.keypoints.x) {
        ctx.fillStyle = color;
        row.keypoints.x.forEach(function (x, i) {
          if ((row.keypoints.visible || [])[i] >= 0.5) { ctx.beginPath(); ctx.arc(x, row.keypoints.y[i], 3 * k, 0, 2 * Math.PI); ctx.fill(); }
        });
      }
    });
    labels.reverse().forEach(function (l) { label(ctx, text(l[0]), l[1], l[2], colour(l[0]), k); });
    return labels.length;
  }

  // The image is decoded from the chosen file itself (createImageBitmap): no blob: URL, which the page's
  // Content-Security-Policy (default-src 'self') would refuse to load. Resolves to the image's results.
  function draw(canvas, file, answer) {
    return createImageBitmap(file, {imageOrientation: 'from-image'}).then(function (image) {
      // A small image shown larger is drawn at the screen's resolution (``s`` canvas pixels per image pixel), so
      // lines and labels stay sharp; shapes are drawn in image pixels either way.
      canvas.hidden = false;
      canvas.width = image.width;
      const shown = canvas.getBoundingClientRect().width || image.width;
      const s = Math.max(1, Math.min(8, Math.round(shown * (window.devicePixelRatio || 1) / image.width)));
      canvas.width = image.width * s;
      canvas.height = image.height * s;
      canvas.dataset.imageWidth = image.width;
      canvas.dataset.imageHeight = image.height;
      const k = image.width / shown;
      const ctx = canvas.getContext('2d');
      ctx.scale(s, s);
      ctx.drawImage(image, 0, 0);
      image.close();
      const entry = answer.images[0] || {results: []};
      const shapes = drawResults(ctx, entry.results, k);
      canvas.dataset.boxes = shapes;
      canvas.dataset.results = entry.results.length;
      return entry.results;
    });
  }

  // "3 results in 120 ms (detect): circle 0.91, square 0.88" (the five most confident named).
  function summary(results, answer, elapsed) {
    const top = results.slice(0, 5).map(text);
    return results.length + ' result' + (results.length === 1 ? '' : 's') + ' in ' + Math.round(elapsed) + ' ms (' +
      answer.metadata.task + ')' + (top.length ? ': ' + top.join(', ') : '');
  }

  // POST the image to a predict route (shared inference or an endpoint) with the session's CSRF token.
  function predict(url, file, conf, imgsz) {
    const body = new FormData();
    body.append('file', file);
    body.append('conf', conf || '0.25');
    if (imgsz) { body.append('imgsz', imgsz); }
    return lanner.fetch(url, {method: 'POST', body: body}).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (answer) {
        if (!response.ok) { throw new Error(answer.error || ('Request failed (' + response.status + ').')); }
        return answer;
      });
    });
  }

  window.lannerPredictions = {draw: draw, summary: summary, predict: predict, colour: colour, text: text};
})();
