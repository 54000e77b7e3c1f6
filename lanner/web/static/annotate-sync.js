// Autosave: every change is PUT with the image's revision and an editId. Per image, localStorage keeps
//   {revision, sending: {labels, classId, editId, revision} | null, pending: {labels, classId} | null}
// "sending" is the request in flight (or failed without an answer): it is retried with the same editId until the
// server answers, so a request that reached the server but whose answer was lost is not applied twice (the API
// answers a repeated editId with the current state). "pending" is the newest state typed meanwhile; it goes out
// (with a fresh editId and the revision the last answer gave) once "sending" is answered. A 409 stops the image's
// queue and asks the page: keep theirs, or overwrite with mine. Nothing is dropped until the server has it.
(function () {
  'use strict';

  const RETRY_MIN = 1000, RETRY_MAX = 15000;

  function newEditId() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, function (b) { return b.toString(16).padStart(2, '0'); }).join('');
  }

  function Sync(options) {
    this.api = options.api;                   // /api/datasets/{owner}/{dataset}
    this.prefix = 'lanner.annotate.' + options.datasetId + '.';
    this.onStatus = options.onStatus;         // (state: saved|saving|unsaved|conflict, detail)
    this.onConflict = options.onConflict;     // (key, current, mine)
    this.onSaved = options.onSaved;           // (key, body)
    this.busy = {};                           // key → true while a request is out
    this.conflicts = {};                      // key → the server's current state
    this.delay = RETRY_MIN;
    this.timer = null;
    this.lastError = '';
    const self = this;
    window.addEventListener('online', function () { self.delay = RETRY_MIN; self.flushAll(); });
  }

  Sync.prototype.read = function (key) {
    try { return JSON.parse(localStorage.getItem(this.prefix + key)) || null; } catch (e) { return null; }
  };
  Sync.prototype.write = function (key, entry) {
    if (!entry.sending && !entry.pending) { localStorage.removeItem(this.prefix + key); return; }
    localStorage.setItem(this.prefix + key, JSON.stringify(entry));
  };
  Sync.prototype.keys = function () {
    const keys = [];
    for (let i = 0; i < localStorage.length; i++) {
      const name = localStorage.key(i);
      if (name && name.indexOf(this.prefix) === 0) { keys.push(name.slice(this.prefix.length)); }
    }
    return keys;
  };

  // What the browser holds for an image that the server may not have yet: the newest state, or null.
  Sync.prototype.unsaved = function (key) {
    const entry = this.read(key);
    if (!entry) { return null; }
    return entry.pending || entry.sending;
  };

  // The server's revision for an image (from a GET), unless a queued change already carries one.
  Sync.prototype.known = function (key, revision) {
    this.revisions = this.revisions || {};
    this.revisions[key] = revision;
  };

  // A new state of an image's labels: kept at once, sent as soon as the queue allows.
  Sync.prototype.save = function (key, labels, classId) {
    const entry = this.read(key) || {revision: (this.revisions || {})[key]};
    entry.pending = {labels: labels, classId: classId};
    this.write(key, entry);
    this.flush(key);
  };

  Sync.prototype.flushAll = function () {
    const self = this;
    const keys = this.keys();
    keys.forEach(function (key) { self.flush(key); });
    this.report();
  };

  Sync.prototype.report = function () {
    const waiting = this.keys().length;
    const conflicted = Object.keys(this.conflicts).length;
    const busy = Object.keys(this.busy).length;
    if (conflicted) { this.onStatus('conflict', 'Conflict: choose which version to keep'); }
    else if (!waiting) { this.onStatus('saved', 'All changes saved'); }
    else if (busy && !this.lastError) { this.onStatus('saving', 'Saving…'); }
    else { this.onStatus('unsaved', 'Unsaved: ' + waiting + ' image' + (waiting === 1 ? '' : 's') +
                         ' waiting' + (this.lastError ? ' (' + this.lastError + '); retrying' : '')); }
  };

  Sync.prototype.retryLater = function () {
    const self = this;
    if (this.timer) { return; }
    this.timer = setTimeout(function () { self.timer = null; self.flushAll(); }, this.delay);
    this.delay = Math.min(this.delay * 2, RETRY_MAX);
  };

  Sync.prototype.flush = function (key) {
    if (this.busy[key] || this.conflicts[key]) { this.report(); return; }
    const entry = this.read(key);
    if (!entry) { this.report(); return; }
    if (!entry.sending) {
      if (!entry.pending) { this.write(key, entry); this.report(); return; }
      entry.sending = Object.assign({editId: newEditId(), revision: entry.revision}, entry.pending);
      entry.pending = null;
      this.write(key, entry);
    }
    const sending = entry.sending;
    const body = {labels: sending.labels, revision: sending.revision, editId: sending.editId};
    if (sending.classId !== undefined) { body.classId = sending.classId; }
    const self = this;
    this.busy[key] = true;
    this.report();
    lanner.fetch(this.api + '/annotate/' + encodeURIComponent(key), {
      method: 'PUT', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        return {status: response.status, data: data};
      });
    }).then(function (answer) {
      delete self.busy[key];
      self.answered(key, sending, answer.status, answer.data);
    }, function () {
      delete self.busy[key];
      self.lastError = 'offline';
      self.report();
      self.retryLater();
    });
  };

  Sync.prototype.answered = function (key, sending, status, data) {
    const entry = this.read(key) || {};
    if (status === 200) {
      this.lastError = '';
      this.delay = RETRY_MIN;
      entry.revision = data.revision;
      entry.sending = null;
      this.known(key, data.revision);
      this.write(key, entry);
      this.onSaved(key, data, !entry.pending);
      this.flush(key);
      return;
    }
    if (status === 409 && data.current) {
      this.conflicts[key] = data.current;
      this.report();
      this.onConflict(key, data, entry.pending || entry.sending);
      return;
    }
    if (status >= 500 || status === 429 || status === 0) {
      this.lastError = 'server ' + status;
      this.report();
      this.retryLater();
      return;
    }
    // 400/403/404: this change can never be saved; keep it out of the queue and say why.
    entry.sending = null;
    this.write(key, entry);
    this.lastError = '';
    lanner.showMessage((data && data.error) || ('Saving failed (' + status + ').'), 'error');
    this.flush(key);
  };

  // The person chose: 'theirs' drops what the browser holds; 'mine' sends it again over their revision.
  Sync.prototype.resolve = function (key, choice) {
    const current = this.conflicts[key];
    delete this.conflicts[key];
    const entry = this.read(key) || {};
    const mine = entry.pending || entry.sending;
    this.known(key, current.revision);
    if (choice === 'mine' && mine) {
      this.write(key, {revision: current.revision, sending: null, pending: {labels: mine.labels, classId: mine.classId}});
      this.flush(key);
    } else {
      localStorage.removeItem(this.prefix + key);
      this.report();
    }
    return current;
  };

  window.LannerSync = Sync;
})();
