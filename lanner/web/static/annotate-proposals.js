// Proposals: the model picker (the API's proposal models, with the classes each cannot map), "Propose labels" on
// this image or on it and the next unlabelled images, a confidence slider that filters what is shown, and the
// assistant: when it has a model, its proposals pre-fill each unlabelled image opened. Proposals are kept per
// image key for the page's life; accepting one turns it into a label exactly as proposed (its confidence dropped),
// so the server can count it as accepted unchanged.
(function () {
  'use strict';

  function Proposals(editor) {
    this.editor = editor;
    this.api = editor.config.api;
    this.byKey = {};        // key → [{label, confidence, model}]
    this.assistant = null;  // the assistant's model ref, once known
    this.models = [];
    this.select = document.getElementById('an-model');
    this.hint = document.getElementById('an-model-hint');
    this.conf = document.getElementById('an-conf');
    this.status = document.getElementById('an-prop-status');
    const self = this;
    this.select.addEventListener('change', function () { self.describe(); });
    this.conf.addEventListener('input', function () {
      document.getElementById('an-conf-value').textContent = Number(self.conf.value).toFixed(2);
      editor.refresh();
    });
    document.getElementById('an-propose').addEventListener('click', function () { self.propose(); });
  }

  Proposals.prototype.load = function () {
    const self = this;
    lanner.fetch(this.api + '/proposal-models').then(function (r) { return r.ok ? r.json() : {models: []}; })
      .then(function (data) {
        self.models = data.models || [];
        self.select.textContent = '';
        if (!self.models.length) { self.select.append(new Option('No trained model fits this dataset yet', '')); }
        self.models.forEach(function (m) { self.select.append(new Option(m.ref + ' (' + m.task + ')', m.ref)); });
        self.describe();
      }, function () { self.hint.textContent = 'Models could not be listed.'; });
    lanner.fetch(this.api + '/assistant').then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (data && data.model && data.model.ref) {
          self.assistant = data.model.ref;
          self.status.textContent = 'The assistant (' + self.assistant + ') pre-fills unlabelled images.';
          self.prefill(self.editor.key);
        }
      }, function () { /* no assistant: nothing to pre-fill */ });
  };

  Proposals.prototype.describe = function () {
    const ref = this.select.value;
    const model = this.models.find(function (m) { return m.ref === ref; });
    this.hint.textContent = !model ? '' : model.matched + ' class' + (model.matched === 1 ? '' : 'es') + ' matched' +
      (model.unmatched && model.unmatched.length ? '; not in this dataset: ' + model.unmatched.join(', ') : '');
  };

  Proposals.prototype.threshold = function () { return Number(this.conf.value); };

  // The proposals of an image still open (not accepted or rejected), with their index, above the threshold.
  Proposals.prototype.visible = function (key) {
    const min = this.threshold();
    return (this.byKey[key] || []).map(function (p, i) { return Object.assign({index: i}, p); })
      .filter(function (p) { return p.confidence >= min; });
  };

  Proposals.prototype.request = function (model, keys) {
    const self = this;
    return lanner.fetch(this.api + '/proposals', {
      method: 'POST', headers: {'Content-Type': 'application/json'},
      body: JSON.stringify({model: model, keys: keys, conf: Math.max(0.01, Math.min(this.threshold(), 1))}),
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (data) {
        if (!r.ok) { throw new Error(data.error || ('Proposals failed (' + r.status + ').')); }
        Object.keys(data.images || {}).forEach(function (key) {
          self.byKey[key] = data.images[key].map(function (p) {
            const label = Object.assign({}, p);
            delete label.confidence;
            return {label: label, confidence: p.confidence, model: model};
          });
        });
        return data;
      });
    });
  };

  Proposals.prototype.propose = function () {
    const model = this.select.value;
    if (!model) { this.status.textContent = 'Pick a model first.'; return; }
    const editor = this.editor, self = this;
    const keys = document.getElementById('an-scope').value === 'selection'
      ? [editor.key].concat(editor.config.selection.filter(function (k) { return k !== editor.key; })) : [editor.key];
    this.status.textContent = 'Proposing for ' + keys.length + ' image' + (keys.length === 1 ? '' : 's') + '…';
    this.request(model, keys).then(function (data) {
      const shown = (self.byKey[editor.key] || []).length;
      self.status.textContent = shown + ' proposal' + (shown === 1 ? '' : 's') + ' on this image' +
        (keys.length > 1 ? ', and ready on ' + (keys.length - 1) + ' more' : '') +
        ((data.unmatched || []).length ? '; dropped classes: ' + data.unmatched.join(', ') : '') + '.';
      editor.refresh();
    }, function (err) { self.status.textContent = err.message; });
  };

  // Proposals the server kept for an image never labelled (a workflow that collected it from an endpoint), shown
  // as the model's proposals when the page has none for it yet.
  Proposals.prototype.suggest = function (key, suggestions) {
    if (this.byKey[key] || this.editor.labels.length || !suggestions.length) { return; }
    this.byKey[key] = [];
    const self = this;
    suggestions.forEach(function (s) {
      (s.labels || []).forEach(function (p) {
        const label = Object.assign({}, p);
        delete label.confidence;
        self.byKey[key].push({label: label, confidence: typeof p.confidence === 'number' ? p.confidence : 1,
                              model: s.model});
      });
    });
    this.status.textContent = this.byKey[key].length + ' proposal' + (this.byKey[key].length === 1 ? '' : 's') +
      ' kept from ' + suggestions[0].model + ' when this image was collected.';
    this.editor.refresh();
  };

  // The assistant's proposals for an image just opened, when it has none yet and no labels.
  Proposals.prototype.prefill = function (key) {
    const editor = this.editor, self = this;
    if (!this.assistant || this.byKey[key] || editor.labels.length) { return; }
    this.byKey[key] = [];
    this.request(this.assistant, [key]).then(function () { if (editor.key === key) { editor.refresh(); } },
                                             function (err) { delete self.byKey[key]; self.status.textContent = err.message; });
  };

  // Take proposals out of the list; the accepted ones come back as labels.
  Proposals.prototype.take = function (key, indexes) {
    const list = this.byKey[key] || [];
    const taken = indexes.map(function (i) { return list[i]; }).filter(Boolean);
    this.byKey[key] = list.filter(function (_, i) { return indexes.indexOf(i) < 0; });
    return taken.map(function (p) { return p.label; });
  };

  window.LannerProposals = Proposals;
})();
