// The dataset page's "Auto-annotate" dialog (lanner/web/templates/_dataset_autolabel.html), on the SDK's own
// routes: Preview runs the chosen model on up to six unlabelled images (POST .../predict/batch {preview: true})
// and draws the boxes it proposes over each image; Apply queues the run (a version is saved first) and the
// dialog follows its progress (GET .../predict/batch) until it ends, with Cancel while it runs.
(function () {
  'use strict';
  const SVG = 'http://www.w3.org/2000/svg';

  function start(dialog) {
    const api = dialog.dataset.api;
    const form = dialog.querySelector('#autolabel-form');
    const status = dialog.querySelector('#al-status');
    const list = dialog.querySelector('#al-preview');
    const apply = dialog.querySelector('#al-apply');
    const cancel = dialog.querySelector('#al-cancel');
    const progress = dialog.querySelector('#al-progress');
    let timer = null;

    function settings() {
      return {modelId: form.model.value, confidence: parseFloat(form.confidence.value),
              includeAnnotated: form.includeAnnotated.checked};
    }

    async function call(method, url, body) {
      const response = await lanner.fetch(url, {method: method, headers: {'Content-Type': 'application/json'},
                                                body: body ? JSON.stringify(body) : undefined});
      const data = await response.json().catch(function () { return {}; });
      if (!response.ok) { throw new Error(data.error || ('HTTP ' + response.status)); }
      return data;
    }

    function figure(image, names) {
      const item = document.createElement('li');
      const svg = document.createElementNS(SVG, 'svg');
      svg.setAttribute('viewBox', '0 0 ' + image.width + ' ' + image.height);
      svg.setAttribute('role', 'img');
      svg.setAttribute('aria-label', image.name + ': ' + image.labels.length + ' boxes');
      const picture = document.createElementNS(SVG, 'image');
      picture.setAttribute('href', image.imageUrl);
      picture.setAttribute('width', image.width);
      picture.setAttribute('height', image.height);
      svg.appendChild(picture);
      image.labels.forEach(function (label) {
        if (!label.bbox) { return; }
        const [cx, cy, w, h] = label.bbox;
        const rect = document.createElementNS(SVG, 'rect');
        rect.setAttribute('class', 'ds-box al-box ds-c' + (label.classId % 10));
        rect.setAttribute('x', (cx - w / 2) * image.width);
        rect.setAttribute('y', (cy - h / 2) * image.height);
        rect.setAttribute('width', w * image.width);
        rect.setAttribute('height', h * image.height);
        rect.setAttribute('vector-effect', 'non-scaling-stroke');
        const title = document.createElementNS(SVG, 'title');
        title.textContent = (names[label.classId] || label.classId) + ' ' + Math.round(label.confidence * 100) + '%';
        rect.appendChild(title);
        svg.appendChild(rect);
      });
      const caption = document.createElement('span');
      caption.className = 'muted';
      caption.textContent = image.name + ' · ' + image.labels.length + ' box' + (image.labels.length === 1 ? '' : 'es');
      item.append(svg, caption);
      return item;
    }

    async function preview(event) {
      event.preventDefault();
      apply.disabled = true;
      list.replaceChildren();
      status.textContent = 'Running the model on up to six images…';
      try {
        const started = await call('POST', api, Object.assign(settings(), {preview: true}));
        const shown = await call('GET', api + '/preview?jobId=' + encodeURIComponent(started.jobId));
        shown.images.forEach(function (image) { list.appendChild(figure(image, shown.classNames)); });
        const boxes = shown.images.reduce(function (n, image) { return n + image.labels.length; }, 0);
        status.textContent = 'Preview: ' + boxes + ' boxes on ' + shown.images.length +
          ' images. Nothing is changed until you apply.';
        apply.disabled = false;
      } catch (error) {
        status.textContent = error.message;
      }
    }

    function follow() {
      clearTimeout(timer);
      timer = setTimeout(async function () {
        let state;
        try { state = await call('GET', api); } catch (error) { status.textContent = error.message; return; }
        const active = state.activeJob;
        if (active) {
          progress.hidden = false;
          progress.max = active.progress.total || 1;
          progress.value = active.progress.processed;
          status.textContent = (active.stopping ? 'Stopping… ' : 'Labelling… ') + active.progress.processed +
            ' of ' + active.progress.total + ' images.';
          follow();
          return;
        }
        cancel.hidden = true;
        const last = state.lastRun;
        if (last && last.results) {
          progress.value = progress.max;
          status.textContent = (last.failed ? 'Failed: ' + last.error + '. ' : last.stopped ? 'Cancelled. ' : 'Done: ') +
            last.results.annotations + ' labels added to ' + last.results.processed + ' images.';
        }
      }, 700);
    }

    async function run() {
      apply.disabled = true;
      try {
        await call('POST', api, settings());
        cancel.hidden = false;
        status.textContent = 'Queued: a version of the dataset was saved first.';
        follow();
      } catch (error) {
        status.textContent = error.message;
      }
    }

    form.addEventListener('submit', preview);
    form.addEventListener('change', function () { apply.disabled = true; });  // a new setting needs a new preview
    apply.addEventListener('click', run);
    cancel.addEventListener('click', async function () {
      try { await call('DELETE', api); status.textContent = 'Cancelling…'; } catch (error) { status.textContent = error.message; }
    });
    dialog.querySelector('#al-close').addEventListener('click', function () {
      dialog.close();
      if (!cancel.hidden || progress.value > 0) { window.location.reload(); }  // the grid shows the new labels
    });
    document.getElementById('autolabel-open').addEventListener('click', function () {
      dialog.showModal();
      dialog.querySelector('#autolabel-title').focus();
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    const dialog = document.getElementById('autolabel-dialog');
    if (dialog) { start(dialog); }
  });
})();
