// The datasets page's upload area: drop (or pick) an archive and it is uploaded as the SDK does it: create the
// dataset, ask for a signed upload URL, PUT the file (with a progress bar), complete the upload, start the
// import, then follow the dataset until the import is done and show its report. Every call is same-origin with
// the session cookie and the CSRF header (lanner.fetch; the PUT sends the header too).
(function () {
  'use strict';

  const POLL_MS = 1000;

  function csrfToken() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : '';
  }

  function send(url, body, method) {
    const call = window.lanner && window.lanner.fetch ? window.lanner.fetch : fetch;
    const options = {method: method || 'POST', credentials: 'same-origin',
                     headers: {'Content-Type': 'application/json', 'X-CSRFToken': csrfToken(), 'Accept': 'application/json'}};
    if (body !== undefined) { options.body = JSON.stringify(body); }
    return call(url, options).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        if (!response.ok) { throw new Error(data.error || data.detail || ('Request failed (' + response.status + ').')); }
        return data;
      });
    });
  }

  function put(url, file, headers, onProgress) {
    return new Promise(function (resolve, reject) {
      const xhr = new XMLHttpRequest();
      xhr.open('PUT', url);
      Object.keys(headers || {}).forEach(function (name) { xhr.setRequestHeader(name, headers[name]); });
      // Lanner's own PUT route checks the CSRF token; a bucket's presigned URL must not receive it.
      if (new URL(url, window.location.href).origin === window.location.origin) {
        xhr.setRequestHeader('X-CSRFToken', csrfToken());
      }
      xhr.upload.addEventListener('progress', function (event) {
        if (event.lengthComputable) { onProgress(event.loaded / event.total); }
      });
      xhr.addEventListener('load', function () {
        if (xhr.status >= 200 && xhr.status < 300) { resolve(); } else { reject(new Error('Upload failed (' + xhr.status + ').')); }
      });
      xhr.addEventListener('error', function () { reject(new Error('The upload was interrupted.')); });
      xhr.send(file);
    });
  }

  function baseName(filename) {
    return filename.replace(/\.(zip|tar|tar\.gz|tgz|ndjson)$/i, '');
  }

  function setup(drop) {
    const form = document.getElementById(drop.dataset.form);
    const input = document.getElementById('ds-file');
    const box = document.getElementById('ds-upload');
    const step = document.getElementById('ds-upload-step');
    const bar = document.getElementById('ds-progress');
    const report = document.getElementById('ds-report');
    let busy = false;

    function say(text, percent) {
      step.textContent = text;
      if (percent !== undefined) { bar.value = percent; }
    }

    function poll(owner, slug) {
      return send('/api/datasets/' + owner + '/' + slug, undefined, 'GET').then(function (data) {
        if (data.dataset && data.dataset.status === 'processing') {
          return new Promise(function (resolve) { setTimeout(resolve, POLL_MS); }).then(function () { return poll(owner, slug); });
        }
        return data.dataset;
      });
    }

    // The list below, as the server renders it now (the new dataset among it).
    function refreshList() {
      return fetch(window.location.pathname + window.location.search, {credentials: 'same-origin'}).then(function (response) { return response.text(); })
        .then(function (html) {
          const fresh = new DOMParser().parseFromString(html, 'text/html').getElementById('dataset-section');
          const current = document.getElementById('dataset-section');
          if (fresh && current) { current.replaceWith(document.importNode(fresh, true)); }
        });
    }

    function showReport(owner, slug) {
      return fetch('/datasets/' + owner + '/' + slug + '/import-report', {credentials: 'same-origin'})
        .then(function (response) { return response.text(); })
        .then(function (html) { report.innerHTML = html; return refreshList(); });
    }

    function upload(file) {
      if (busy || !file) { return; }
      busy = true;
      drop.classList.add('ds-busy');
      box.hidden = false;
      report.textContent = '';
      const field = form ? form.querySelector('[name="name"]') : null;
      const name = (field && field.value.trim()) || baseName(file.name);
      const task = form ? form.querySelector('[name="task"]').value : 'detect';
      const visibility = form ? form.querySelector('[name="visibility"]').value : 'private';
      const workspace = form ? form.querySelector('[name="owner"]') : null;  // a team's list: create it there
      const fields = {name: name, task: task, visibility: visibility};
      if (workspace) { fields.owner = workspace.value; }
      let owner, slug;
      say('Creating “' + name + '”…', 0);
      send('/api/datasets', fields).then(function (made) {
        owner = made.owner; slug = made.dataset;
        return send('/api/upload/signed-url', {assetType: 'datasets', assetId: made.id, filename: file.name,
                                               contentType: 'application/octet-stream', totalBytes: file.size});
      }).then(function (slot) {
        say('Uploading ' + file.name + '…', 0);
        return put(slot.uploadUrl, file, slot.headers, function (fraction) {
          say('Uploading ' + file.name + ': ' + Math.round(fraction * 100) + '%', Math.round(fraction * 100));
        }).then(function () { return slot.sessionId; });
      }).then(function (sessionId) {
        say('Checking the upload…', 100);
        return send('/api/upload/complete', {sessionId: sessionId}).then(function () { return sessionId; });
      }).then(function (sessionId) {
        say('Importing the images…', 100);
        return send('/api/datasets/' + owner + '/' + slug + '/ingest', {sessionId: sessionId});
      }).then(function () {
        return poll(owner, slug);
      }).then(function (dataset) {
        say(dataset.status === 'failed' ? 'The import failed.' : 'Imported ' + dataset.imageCount + ' images.', 100);
        return showReport(owner, slug);
      }).catch(function (error) {
        say('Upload failed: ' + error.message);
        if (owner && slug) { showReport(owner, slug); }
      }).finally(function () {
        busy = false;
        drop.classList.remove('ds-busy');
        input.value = '';
      });
    }

    drop.hidden = false;
    input.addEventListener('change', function () { upload(input.files[0]); });
    ['dragenter', 'dragover'].forEach(function (type) {
      drop.addEventListener(type, function (event) { event.preventDefault(); drop.classList.add('ds-over'); });
    });
    ['dragleave', 'drop'].forEach(function (type) {
      drop.addEventListener(type, function (event) { event.preventDefault(); drop.classList.remove('ds-over'); });
    });
    drop.addEventListener('drop', function (event) {
      const files = event.dataTransfer && event.dataTransfer.files;
      if (files && files.length) { upload(files[0]); }
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    const drop = document.getElementById('ds-drop');
    if (drop) { setup(drop); }
  });
})();
