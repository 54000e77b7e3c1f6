// The dataset map (templates/dataset_map.html, lanner/web/map_pages.py): every image a point of its embedding's
// 2-D layout, drawn by deck.gl (WebGL, its ScatterplotLayer over binary attributes, drawn as one point list:
// map-points.js; 200,000 points draw in a frame, and picking for hover runs on the GPU). Colour by any field the server sends (map-colours.js). Hover shows the image's thumbnail
// (the images API, one image, cached). The lasso (its button, or Shift while dragging) selects the points inside,
// tested in the map's own coordinates; the selection is then stored on the server and the dataset's grid filtered
// to it shows under the map, with its paging and bulk actions (or on the dataset page, with its filters too).
// While the map cannot be drawn yet (embeddings or the layout being computed) the page shows where it stands and
// asks again every 2 s. Colours and the legend: map-colours.js.
// window.lannerMap exposes the drawn points' keys and screen positions for scripts (the browser test, the
// benchmark), read-only.
(function () {
  'use strict';

  const POLL_MS = 2000;
  const STATES = {none: 'map-none', embedding: 'map-progress', computing: 'map-computing', failed: 'map-failed',
                  loading: 'map-ready', ready: 'map-ready'};

  function $(id) { return document.getElementById(id); }

  const root = $('map-view');
  const lasso = {on: false, path: null};
  const map = {n: 0, keys: [], positions: null, fields: [], field: null, selected: null, count: 0, deck: null,
               datasetId: '', thumbs: {}, hovered: -1};

  function show(state) {
    root.dataset.state = state;
    Object.keys(STATES).forEach(function (name) { $(STATES[name]).hidden = STATES[name] !== STATES[state]; });
  }

  function fail(message) { lanner.showMessage(message, 'error'); }

  function load() {
    fetch(root.dataset.points, {credentials: 'same-origin'})
      .then(function (response) {
        return response.json().then(function (body) {
          if (!response.ok) { throw new Error(body.error || 'The map could not be loaded.'); }
          return body;
        });
      })
      .then(function (body) {
        if (body.state === 'ready') { draw(body); return; }
        show(body.state);
        if (body.state === 'embedding' && body.job && body.job.progress) {
          const p = body.job.progress;
          $('map-progress-bar').value = p.percent;
          $('map-progress-text').textContent = body.job.trainingHead
            ? 'All ' + p.total + ' images embedded; training the copy-detection head that finds edited copies (a minute or two)…'
            : 'Computing embeddings: ' + p.processed + ' of ' + p.total + ' images…';
        }
        if (body.state === 'failed') { $('map-failed-text').textContent = body.message; }
        if (body.state !== 'none') { window.setTimeout(load, POLL_MS); }
      })
      .catch(function (error) { fail(error.message); });
  }

  function colours() {
    const out = new Uint8Array(map.n * 4);
    const colour = lannerMapColours.colourOf(map.field);
    for (let i = 0; i < map.n; i++) {
      const rgb = colour(i);
      out[4 * i] = rgb[0]; out[4 * i + 1] = rgb[1]; out[4 * i + 2] = rgb[2];
      out[4 * i + 3] = map.selected ? (map.selected[i] ? 255 : 30) : 215;
    }
    return out;
  }

  function legend() { lannerMapColours.legend($('map-legend'), map.field, map.n); }

  function layer() {
    const radius = map.n > 50000 ? 1.5 : map.n > 5000 ? 2.5 : 5;
    return new lannerMapPoints.PointsLayer({
      id: 'points', data: {length: map.n, attributes: {
        getPosition: {value: map.positions, size: 3},
        getFillColor: {value: colours(), size: 4, normalized: true}}},
      radiusUnits: 'pixels', getRadius: radius, radiusMinPixels: radius, stroked: false, pickable: true,
      antialiasing: false,
    });
  }

  function recolour() {
    map.deck.setProps({layers: [layer()]});
    legend();
  }

  // --- drawing -------------------------------------------------------------------------------------------------

  function fit() {
    const area = $('map-canvas');
    let x0 = Infinity; let x1 = -Infinity; let y0 = Infinity; let y1 = -Infinity;
    for (let i = 0; i < map.n; i++) {
      const x = map.positions[3 * i]; const y = map.positions[3 * i + 1];
      x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
    }
    if (!map.n) { x0 = y0 = -1; x1 = y1 = 1; }
    const scale = Math.min(area.clientWidth / Math.max(x1 - x0, 1e-6), area.clientHeight / Math.max(y1 - y0, 1e-6));
    return {target: [(x0 + x1) / 2, (y0 + y1) / 2, 0], zoom: Math.log2(scale * 0.85), minZoom: -10, maxZoom: 24};
  }

  function summary(body) {
    const when = body.updatedAt ? new Date(body.updatedAt).toLocaleString() : '';
    $('map-summary').textContent = body.count.toLocaleString('en') + ' image' + (body.count === 1 ? '' : 's') +
      (when ? ' · laid out ' + when : '');
    if (body.stale || body.missing) {
      $('map-missing').textContent = body.missing ? body.missing + ' image' + (body.missing === 1 ? ' is' : 's are') +
        ' not on it yet' : 'images were removed or replaced';
      $('map-stale').hidden = false;
      if ($('map-reanalyse')) { $('map-reanalyse').hidden = false; }
    }
  }

  function points(body) {
    summary(body);
    map.n = body.count;
    map.keys = body.keys;
    map.datasetId = body.datasetId;
    map.fields = body.fields;
    map.positions = new Float32Array(map.n * 3);
    for (let i = 0; i < map.n; i++) { map.positions[3 * i] = body.x[i]; map.positions[3 * i + 1] = body.y[i]; }
  }

  function draw(body) {
    show('ready');
    points(body);
    const select = $('map-colour');
    select.replaceChildren();
    map.fields.forEach(function (field) {
      const option = document.createElement('option');
      option.value = field.name;
      option.textContent = field.label + (field.kind === 'number' ? ' (' + field.unit + ')' : '');
      select.append(option);
    });
    const cluster = map.fields.find(function (f) { return f.name === 'cluster'; });
    map.field = cluster && cluster.names.length > 1 ? cluster
      : map.fields.find(function (f) { return f.name === 'class'; }) || map.fields[0];
    select.value = map.field.name;
    let painted = false;
    map.deck = new deck.Deck({
      parent: $('map-canvas'), views: new deck.OrthographicView({id: 'map'}), initialViewState: fit(),
      controller: {doubleClickZoom: false}, layers: [layer()], onHover: hover,
      getCursor: function (state) { return state.isDragging ? 'grabbing' : state.isHovering ? 'pointer' : 'grab'; },
      onAfterRender: function () {
        if (painted) { return; }
        painted = true;
        // The first frame's pixels read back: that waits until it is drawn, not only sent (software WebGL takes
        // seconds for 100,000 points); the time since navigation is the benchmark's first paint
        root.dataset.submittedMs = String(Math.round(performance.now()));
        const gl = map.deck.device && map.deck.device.gl;
        if (gl) { gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, new Uint8Array(4)); }
        root.dataset.paintedMs = String(Math.round(performance.now()));
        root.dataset.state = 'ready';
        $('map-loading').hidden = true;
      },
    });
    legend();
  }

  // --- hover ---------------------------------------------------------------------------------------------------

  function thumbnail(index, done) {
    const key = map.keys[index];
    if (map.thumbs[key]) { done(map.thumbs[key]); return; }
    lanner.fetch(root.dataset.images, {method: 'POST', headers: {'Content-Type': 'application/json'},
                                       body: JSON.stringify({imageIds: [map.datasetId + '-' + key]})})
      .then(function (response) { return response.ok ? response.json() : {images: []}; })
      .then(function (answer) {
        const image = answer.images[0];
        if (image) { map.thumbs[key] = image; done(image); }
      });
  }

  function hover(info) {
    const tip = $('map-tooltip');
    if (!info.picked || info.index < 0) { tip.hidden = true; map.hovered = -1; return; }
    map.hovered = info.index;
    const area = $('map-area');  // beside the pointer, on the side with room
    const left = info.x + 200 > area.clientWidth ? info.x - 194 : info.x + 14;
    const top = info.y + 220 > area.clientHeight ? info.y - 214 : info.y + 14;
    tip.style.left = Math.round(Math.max(0, left)) + 'px';  // the CSSOM, which the CSP allows
    tip.style.top = Math.round(Math.max(0, top)) + 'px';
    $('map-tooltip-name').textContent = '…';
    $('map-tooltip-img').removeAttribute('src');
    tip.hidden = false;
    const index = info.index;
    thumbnail(index, function (image) {
      if (map.hovered !== index) { return; }
      $('map-tooltip-img').src = image.thumbnailUrl || '';
      $('map-tooltip-img').alt = image.name;
      $('map-tooltip-name').textContent = image.name + ' · ' + image.split + ' · ' + image.labelCount + ' label' +
        (image.labelCount === 1 ? '' : 's');
    });
  }

  // --- lasso ---------------------------------------------------------------------------------------------------

  function lassoMode(on) {
    lasso.on = on;
    if (on) { $('map-tooltip').hidden = true; }
    $('map-lasso').setAttribute('aria-pressed', on ? 'true' : 'false');
    $('map-area').classList.toggle('map-lasso-on', on);
  }

  function paintPath() {
    const canvas = $('map-lasso-layer');
    const ctx = canvas.getContext('2d');
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    if (!lasso.path || lasso.path.length < 2) { return; }
    ctx.beginPath();
    lasso.path.forEach(function (p, i) { if (i) { ctx.lineTo(p[0], p[1]); } else { ctx.moveTo(p[0], p[1]); } });
    ctx.closePath();
    ctx.fillStyle = 'rgba(36, 86, 214, 0.12)';
    ctx.strokeStyle = lanner.cssColor('--accent', '#2456d6');
    ctx.lineWidth = 2;
    ctx.fill();
    ctx.stroke();
  }

  function inside(polygon, x, y) {
    let hit = false;
    for (let i = 0, j = polygon.length - 1; i < polygon.length; j = i++) {
      const [xi, yi] = polygon[i]; const [xj, yj] = polygon[j];
      if ((yi > y) !== (yj > y) && x < (xj - xi) * (y - yi) / (yj - yi) + xi) { hit = !hit; }
    }
    return hit;
  }

  function selectInside(path) {
    const viewport = map.deck.getViewports()[0];
    const polygon = path.map(function (p) { return viewport.unproject(p); });
    const xs = polygon.map(function (p) { return p[0]; });
    const ys = polygon.map(function (p) { return p[1]; });
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    const selected = new Uint8Array(map.n);
    let count = 0;
    for (let i = 0; i < map.n; i++) {
      const x = map.positions[3 * i]; const y = map.positions[3 * i + 1];
      if (x >= x0 && x <= x1 && y >= y0 && y <= y1 && inside(polygon, x, y)) { selected[i] = 1; count += 1; }
    }
    map.selected = count ? selected : null;
    map.count = count;
    $('map-selected').hidden = !count;
    $('map-selected-count').textContent = count.toLocaleString('en') + ' image' + (count === 1 ? '' : 's') +
      ' selected';
    // The grid first, the points' new colours after: uploading them queues a frame behind the one being drawn,
    // and with software WebGL (no GPU) the page waits for both before it can show the grid
    showSelection().then(recolour);
  }

  function point(event) {
    const box = $('map-lasso-layer').getBoundingClientRect();
    return [event.clientX - box.left, event.clientY - box.top];
  }

  function bindLasso() {
    const layerCanvas = $('map-lasso-layer');
    new ResizeObserver(function () {
      layerCanvas.width = layerCanvas.clientWidth;
      layerCanvas.height = layerCanvas.clientHeight;
    }).observe(layerCanvas);
    $('map-lasso').addEventListener('click', function () { lassoMode(!lasso.on); });
    document.addEventListener('keydown', function (event) { if (event.key === 'Shift' && map.deck) { lassoMode(true); } });
    document.addEventListener('keyup', function (event) { if (event.key === 'Shift' && map.deck) { lassoMode(false); } });
    layerCanvas.addEventListener('pointerdown', function (event) {
      lasso.path = [point(event)];
      layerCanvas.setPointerCapture(event.pointerId);
      $('map-tooltip').hidden = true;
    });
    layerCanvas.addEventListener('pointermove', function (event) {
      if (lasso.path) { lasso.path.push(point(event)); paintPath(); }
    });
    layerCanvas.addEventListener('pointerup', function () {
      root.dataset.lassoMs = String(Math.round(performance.now()));  // the benchmark's
      delete root.dataset.gridMs;
      const path = lasso.path;
      lasso.path = null;
      paintPath();
      if (path && path.length > 2 && map.deck) { selectInside(path); }
    });
    $('map-clear').addEventListener('click', function () {
      map.selected = null; map.count = 0; $('map-selected').hidden = true; recolour(); showSelection();
    });
    document.addEventListener('lanner:images-changed', reload);
    $('map-reset').addEventListener('click', function () {
      if (map.deck) { map.deck.setProps({initialViewState: Object.assign(fit(), {transitionDuration: 0})}); }
    });
    $('map-colour').addEventListener('change', function (event) {
      map.field = map.fields.find(function (f) { return f.name === event.target.value; });
      recolour();
    });
  }

  // The lasso's images in the dataset's grid, under the map: the selection stored (its keys), then the grid's
  // fragment for it (dataset_pages: ``?sel=``), swapped in by htmx so its paging and bulk actions work here.
  function showSelection() {
    const slot = $('map-grid-slot');
    if (!map.selected) { slot.replaceChildren(); return Promise.resolve(); }
    const keys = [];
    for (let i = 0; i < map.n; i++) { if (map.selected[i]) { keys.push(map.keys[i]); } }
    return lanner.fetch(root.dataset.selection, {method: 'POST', headers: {'Content-Type': 'application/json'},
                                                 body: JSON.stringify({keys: keys})})
      .then(function (response) {
        return response.json().then(function (answer) {
          if (!response.ok) { throw new Error(answer.error || 'The selection could not be kept.'); }
          return answer;
        });
      })
      .then(function (answer) {
        $('map-open').href = answer.url;
        slot.replaceChildren();
        const grid = document.createElement('section');
        grid.id = 'ds-grid';
        slot.append(grid);
        return htmx.ajax('GET', answer.url, {target: '#ds-grid', swap: 'outerHTML'}).then(function () {
          $('ds-grid').dataset.refresh = answer.url;
          root.dataset.gridMs = String(Math.round(performance.now()));  // the benchmark's
        });
      })
      .catch(function (error) { fail(error.message); });
  }

  // After a bulk action on the grid below (dataset.js): the points again, the lasso kept by key.
  function reload() {
    const kept = new Set();
    if (map.selected) { map.keys.forEach(function (k, i) { if (map.selected[i]) { kept.add(k); } }); }
    fetch(root.dataset.points, {credentials: 'same-origin'})
      .then(function (response) { return response.json(); })
      .then(function (body) {
        if (body.state !== 'ready') { return; }
        const field = map.field.name;
        points(body);
        map.field = map.fields.find(function (f) { return f.name === field; }) || map.fields[0];
        map.selected = kept.size ? Uint8Array.from(map.keys, function (k) { return kept.has(k) ? 1 : 0; }) : null;
        recolour();
      });
  }

  window.lannerMap = {
    get keys() { return map.keys.slice(); },
    get drawnAsPoints() {  // map-points.js's point list, not deck.gl's instanced squares
      const layer = map.deck && map.deck.props.layers[0];
      return Boolean(layer && layer.state && layer.state.asPoints);
    },
    screenPosition: function (index) {  // page coordinates of point ``index``
      const [x, y] = map.deck.getViewports()[0].project([map.positions[3 * index], map.positions[3 * index + 1]]);
      const box = $('map-canvas').getBoundingClientRect();
      return [box.left + x, box.top + y];
    },
  };

  document.addEventListener('DOMContentLoaded', function () {
    if (!root || !window.deck) { return; }
    bindLasso();
    if (root.dataset.state !== 'none') { load(); }
  });
})();
