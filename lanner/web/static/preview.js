// The model page's Preview (templates/_model_use.html): an image dropped on the box or chosen goes to shared
// inference (models.predict: the API, with the session and its CSRF token; no endpoint needed) and its predictions
// are drawn over it (predictions.js) and listed (class, confidence, box in pixels). A new confidence or image
// size runs it again; the size starts at the one the model was trained at.
(function () {
  'use strict';

  let current = null;  // the image being previewed

  const LISTED = 20;  // rows listed (the most confident first, as the answer orders them); all are drawn

  function list(results) {
    const table = document.getElementById('preview-results');
    const rows = results.slice(0, LISTED).map(function (r) {
      const tr = document.createElement('tr');
      const name = document.createElement('td');
      const swatch = document.createElement('span');
      swatch.className = 'swatch';
      swatch.textContent = '\u25a0 ';
      swatch.style.color = window.lannerPredictions.colour(r);  // the CSSOM, which the CSP allows
      swatch.setAttribute('aria-hidden', 'true');
      name.append(swatch, document.createTextNode(r.name));
      const conf = document.createElement('td');
      conf.className = 'num';
      conf.textContent = r.confidence !== undefined ? (r.confidence * 100).toFixed(1) + ' %' : '–';
      const box = document.createElement('td');
      box.className = 'num';
      const b = r.box;
      box.textContent = b && b.x4 === undefined ? [b.x1, b.y1, b.x2, b.y2].map(Math.round).join(', ') : '–';
      tr.append(name, conf, box);
      return tr;
    });
    if (results.length > LISTED) {
      const more = document.createElement('tr');
      const cell = more.insertCell();
      cell.colSpan = 3;
      cell.className = 'muted';
      cell.textContent = '… and ' + (results.length - LISTED) + ' more, drawn on the image';
      rows.push(more);
    }
    table.tBodies[0].replaceChildren.apply(table.tBodies[0], rows);
    table.hidden = !rows.length;
  }

  function run(form) {
    if (!current) { lanner.showMessage('Drop or choose an image first.', 'error'); return; }
    const draw = window.lannerPredictions;
    const summary = document.getElementById('preview-summary');
    const button = document.getElementById('preview-run');
    const file = current;
    button.disabled = true;
    form.setAttribute('aria-busy', 'true');
    summary.textContent = 'Predicting ' + file.name + '…';
    const started = performance.now();
    draw.predict(form.dataset.predict, file, document.getElementById('preview-conf').value,
                 document.getElementById('preview-imgsz').value).then(function (answer) {
      const elapsed = performance.now() - started;
      return draw.draw(document.getElementById('preview-canvas'), file, answer).then(function (results) {
        list(results);
        summary.textContent = draw.summary(results, answer, elapsed);
      });
    }).catch(function (error) {
      summary.textContent = 'No preview: ' + error.message;
      lanner.showMessage(error.message, 'error');
    }).finally(function () {
      button.disabled = false;
      form.removeAttribute('aria-busy');
    });
  }

  function setUp(form) {
    const input = document.getElementById('preview-file');
    const drop = document.getElementById('preview-drop');
    input.addEventListener('change', function () {
      if (input.files[0]) { current = input.files[0]; run(form); }
    });
    form.addEventListener('submit', function (event) { event.preventDefault(); run(form); });
    ['preview-conf', 'preview-imgsz'].forEach(function (id) {
      document.getElementById(id).addEventListener('change', function () { if (current) { run(form); } });
    });
    ['dragenter', 'dragover'].forEach(function (name) {
      drop.addEventListener(name, function (event) { event.preventDefault(); drop.classList.add('preview-over'); });
    });
    ['dragleave', 'drop'].forEach(function (name) {
      drop.addEventListener(name, function () { drop.classList.remove('preview-over'); });
    });
    drop.addEventListener('drop', function (event) {
      event.preventDefault();
      const file = event.dataTransfer.files[0];
      if (!file) { return; }
      if (!file.type.startsWith('image/')) { lanner.showMessage(file.name + ' is not an image.', 'error'); return; }
      current = file;
      run(form);
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    const form = document.getElementById('preview-form');
    if (form) { setUp(form); }
  });
})();
