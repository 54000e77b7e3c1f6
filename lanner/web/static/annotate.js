// The label editor's page: opens an image through the annotation API, keeps its labels (as stored) with an undo
// history per image, turns every change into an autosave (annotate-sync.js), and wires the canvas, the class
// picker, the label and proposal lists, the conflict dialog and the keyboard. window.lannerEditor is the editor
// (the browser tests read its labels and revision).
(function () {
  'use strict';

  const S = window.lannerShapes;
  const TOOLS = {detect: ['box'], segment: ['polygon'], obb: ['obb'], pose: ['pose'], classify: []};
  const TOOL_NAMES = {select: ['Select', 'V'], box: ['Box', 'B'], polygon: ['Polygon', 'P'], obb: ['Rotated box', 'O'],
                      pose: ['Keypoints', 'K']};
  const KINDS = {box: 'box', polygon: 'polygon', obb: 'rotated box', pose: 'keypoints'};
  function $(id) { return document.getElementById(id); }
  function copy(value) { return JSON.parse(JSON.stringify(value)); }

  function Editor(config) {
    this.config = config;
    this.key = config.key;
    this.labels = []; this.classId = null; this.revision = null; this.shapes = [];
    this.selected = null; this.histories = {}; this.classIndex = 0; this.hidden = false; this.data = null;
    const self = this;
    this.canvas = new LannerCanvas({
      onCreate: function (shape) { self.create(shape); },
      onChange: function (index, shape) { self.change(index, shape); },
      onSelect: function (sel) { self.select(sel); },
      onHint: function (text) { $('an-hint').textContent = text; },
    });
    this.sync = new LannerSync({
      api: config.api, datasetId: config.datasetId,
      onStatus: function (state, text) { const s = $('an-status'); s.dataset.state = state; s.textContent = text; },
      onSaved: function (key, body) { self.saved(key, body); },
      onConflict: function (key, data, mine) { self.conflict(key, data, mine); },
    });
    this.proposals = new LannerProposals(this);
  }

  Editor.prototype.url = function (key) { return this.config.page + '/' + encodeURIComponent(key) + (this.config.query || ''); };
  Editor.prototype.className = function (id) {
    const names = (this.data && this.data.classNames) || [];
    return id !== null && id !== undefined && id < names.length ? names[id] : 'class ' + id;
  };

  // --- opening an image -----------------------------------------------------------------------------------------

  Editor.prototype.open = function (key, push) {
    const self = this;
    this.canvas.cancel();
    $('an-status').dataset.state = 'loading';
    return lanner.fetch(this.config.api + '/annotate/' + encodeURIComponent(key)).then(function (r) {
      return r.json().then(function (data) { if (!r.ok) { throw new Error(data.error || r.status); } return data; });
    }).then(function (data) {
      self.key = key; self.data = data; self.selected = null;
      self.revision = data.revision;
      self.sync.known(key, data.revision);
      const unsaved = self.sync.unsaved(key);  // typed here before, not yet on the server: it wins
      const state = unsaved || {labels: data.labels || [], classId: self.classOf(data)};
      self.labels = copy(state.labels); self.classId = state.classId === undefined ? null : state.classId;
      if (!self.histories[key]) { self.histories[key] = {stack: [copy(state)], index: 0}; }
      if (push) { history.pushState({key: key}, '', self.url(key)); }
      const leave = document.getElementById('an-queue-leave');  // a selection's queue: leave it on this image
      if (leave && !document.getElementById('an-queue').dataset.done) { leave.href = self.config.page + '/' + encodeURIComponent(key); }
      self.setup(data);
      self.similar(key);
      $('an-editor').dataset.loaded = key;  // the browser tests wait for this
      self.sync.flushAll();
      self.proposals.suggest(key, data.suggestions || []);
      self.proposals.prefill(key);
    }).catch(function (err) { lanner.showMessage('This image could not be opened: ' + err.message, 'error'); });
  };

  // The "Similar" strip of this image (lanner/web/similar_strip.py), swapped in by htmx; it polls itself while
  // the dataset is being analysed.
  Editor.prototype.similar = function (key) {
    if (!$('similar-strip') || !window.htmx) { return; }
    window.htmx.ajax('GET', '/datasets/' + encodeURIComponent(this.config.owner) + '/' +
      encodeURIComponent(this.config.slug) + '/similar/' + encodeURIComponent(key) + '?editor=1',
    {target: '#similar-strip', swap: 'outerHTML'});
  };

  Editor.prototype.classOf = function (data) {
    if (data.classId !== undefined) { return data.classId; }
    return data.task === 'classify' && data.labels && data.labels.length ? data.labels[0].classId : null;
  };

  Editor.prototype.setup = function (data) {
    const img = data.image;
    $('an-title').textContent = img.name;
    document.title = img.name + ' · Annotate · Lanner';
    this.facts();
    const nav = data.neighbours || {};
    [['an-prev', nav.previous], ['an-next', nav.next]].forEach(function (pair) {
      const link = $(pair[0]);
      link.setAttribute('href', pair[1] ? this.url(pair[1]) : '#');
      link.dataset.key = pair[1] || '';
      link.setAttribute('aria-disabled', pair[1] ? 'false' : 'true');
    }, this);
    const kpt = data.kptShape || [0, 3];
    this.canvas.kpt = {k: kpt[0], dim: kpt[1]};
    this.tools();
    this.classes();
    this.canvas.setImage(img.url, img.width, img.height);
    this.refresh();
  };

  Editor.prototype.facts = function () {
    const d = this.data, img = d.image;
    $('an-image-facts').textContent = img.split + ' · ' + img.width + '×' + img.height + ' px' +
      (d.labelledBy ? ' · labelled by ' + d.labelledBy.replace(/^user:/, '') : '');
  };

  Editor.prototype.tools = function () {
    const tools = TOOLS[this.data.task] || [];
    const all = tools.length ? tools.concat(['select']) : [];
    if (all.indexOf(this.canvas.tool) < 0 || !this.toolChosen) { this.canvas.tool = all[0] || 'classify'; }
    const bar = $('an-tools'), self = this;
    bar.textContent = '';
    all.forEach(function (tool) {
      const b = document.createElement('button');
      b.type = 'button'; b.className = 'btn btn-small'; b.dataset.tool = tool;
      b.textContent = TOOL_NAMES[tool][0] + ' (' + TOOL_NAMES[tool][1] + ')';
      b.setAttribute('aria-keyshortcuts', TOOL_NAMES[tool][1]);
      b.setAttribute('aria-pressed', String(tool === self.canvas.tool));
      b.addEventListener('click', function () { self.setTool(tool); });
      bar.append(b);
    });
    this.canvas.hint();
  };

  Editor.prototype.setTool = function (tool) {
    if ((TOOLS[this.data.task] || []).concat(['select']).indexOf(tool) < 0 || this.data.task === 'classify') { return; }
    this.canvas.cancel();
    this.canvas.tool = tool;
    this.toolChosen = true;
    $('an-tools').querySelectorAll('[data-tool]').forEach(function (b) { b.setAttribute('aria-pressed', String(b.dataset.tool === tool)); });
    this.canvas.hint();
  };

  // --- the picture of the state ---------------------------------------------------------------------------------

  Editor.prototype.refresh = function () {
    const d = this.data, self = this;
    if (!d) { return; }
    const dim = d.kptShape ? d.kptShape[1] : 3;
    this.shapes = d.task === 'classify' ? [] : this.labels.map(function (l) { return S.toShape(l, d.task, d.image.width, d.image.height, dim); });
    const visible = this.proposals.visible(this.key).map(function (p) {
      return {index: p.index, confidence: p.confidence, shape: S.toShape(p.label, d.task, d.image.width, d.image.height, dim)};
    });
    this.visibleProposals = visible;
    if (this.selected && this.selected.type === 'label' && this.selected.index >= this.shapes.length) { this.selected = null; }
    if (this.selected && this.selected.type === 'proposal' && this.selected.index >= visible.length) { this.selected = null; }
    this.canvas.classId = this.classIndex;
    const drawn = this.hidden || d.task === 'classify' ? [] : visible;  // a class proposal has no shape: listed only
    this.canvas.setData(this.hidden ? [] : this.shapes, drawn, this.selected);
    const h = this.histories[this.key] || {stack: [], index: 0};
    $('an-undo').disabled = h.index <= 0;
    $('an-redo').disabled = h.index >= h.stack.length - 1;
    $('an-delete').disabled = !this.selected;
    this.labelList(); this.proposalList(visible);
    $('an-classes').querySelectorAll('button').forEach(function (b) {
      const id = Number(b.dataset.classId);
      b.setAttribute('aria-pressed', String(d.task === 'classify' ? id === self.classId : id === self.classIndex));
    });
  };

  Editor.prototype.classes = function () {
    const list = $('an-classes'), self = this;
    list.textContent = '';
    (this.data.classNames || []).forEach(function (name, id) {
      const li = document.createElement('li');
      const b = document.createElement('button');
      b.type = 'button'; b.className = 'an-class'; b.dataset.classId = id; b.dataset.name = name.toLowerCase();
      const sw = document.createElement('span'); sw.className = 'ds-swatch ds-c' + (id % 10);
      const num = document.createElement('kbd'); num.textContent = id < 10 ? String((id + 1) % 10) : '';
      b.append(sw, ' ' + name + ' ', num);
      b.addEventListener('click', function () { self.pickClass(id); });
      li.append(b);
      list.append(li);
    });
  };

  Editor.prototype.entry = function (text, cls, buttons) {
    const li = document.createElement('li');
    if (cls) { li.className = cls; }
    const span = document.createElement('span'); span.textContent = text;
    li.append(span);
    buttons.forEach(function (spec) {
      const b = document.createElement('button');
      b.type = 'button'; b.className = 'btn btn-small'; b.textContent = spec[0];
      b.setAttribute('aria-label', spec[1]);
      b.addEventListener('click', spec[2]);
      li.append(b);
    });
    return li;
  };

  Editor.prototype.labelList = function () {
    const list = $('an-label-list'), self = this;
    list.textContent = '';
    if (this.data.task === 'classify') {
      list.append(this.entry(this.classId === null ? 'No class yet' : 'Image class: ' + this.className(this.classId), '', []));
      $('an-label-count').textContent = '';
      return;
    }
    $('an-label-count').textContent = '(' + this.shapes.length + ')';
    this.shapes.forEach(function (s, i) {
      const text = (i + 1) + '. ' + self.className(s.classId) + ' · ' + KINDS[s.kind];
      const sel = self.selected && self.selected.type === 'label' && self.selected.index === i;
      list.append(self.entry(text, sel ? 'an-current' : '', [
        ['Select', 'Select label ' + (i + 1), function () { self.select({type: 'label', index: i}); $('an-stage').focus(); }],
        ['Delete', 'Delete label ' + (i + 1), function () { self.select({type: 'label', index: i}); self.remove(); }]]));
    });
  };

  Editor.prototype.proposalList = function (visible) {
    const list = $('an-prop-list'), self = this;
    list.textContent = '';
    visible.forEach(function (p, i) {
      const text = self.className(p.shape.classId) + ' · ' + p.confidence.toFixed(2);
      const sel = self.selected && self.selected.type === 'proposal' && self.selected.index === i;
      list.append(self.entry(text, sel ? 'an-current' : '', [
        ['Accept', 'Accept ' + text, function () { self.accept([p.index]); }],
        ['Reject', 'Reject ' + text, function () { self.reject([p.index]); }]]));
    });
    $('an-accept-all').disabled = $('an-reject-all').disabled = !visible.length;
  };

  // --- changes --------------------------------------------------------------------------------------------------

  // Every change goes through here: one undo step, one autosave.
  Editor.prototype.commit = function (labels, classId) {
    const h = this.histories[this.key];
    h.stack = h.stack.slice(0, h.index + 1);
    h.stack.push(copy({labels: labels, classId: classId}));
    h.index = h.stack.length - 1;
    this.apply(h.stack[h.index]);
  };
  Editor.prototype.apply = function (state) {
    this.labels = copy(state.labels); this.classId = state.classId === undefined ? null : state.classId;
    this.sync.save(this.key, this.labels, this.data.task === 'classify' ? this.classId : undefined);
    this.refresh();
  };
  Editor.prototype.step = function (delta) {
    const h = this.histories[this.key];
    if (!h || h.index + delta < 0 || h.index + delta >= h.stack.length) { return; }
    this.canvas.cancel();
    h.index += delta;
    this.selected = null;
    this.apply(h.stack[h.index]);
  };

  Editor.prototype.encode = function (shape) {
    const d = this.data;
    return S.toLabel(shape, d.image.width, d.image.height, d.kptShape ? d.kptShape[1] : 3);
  };
  Editor.prototype.create = function (shape) {
    this.selected = {type: 'label', index: this.labels.length};
    this.commit(this.labels.concat([this.encode(shape)]), this.classId);
  };
  Editor.prototype.change = function (index, shape) {
    const labels = copy(this.labels);
    labels[index] = this.encode(shape);
    this.commit(labels, this.classId);
  };
  Editor.prototype.select = function (sel) { this.selected = sel; this.canvas.vertex = null; this.refresh(); };

  Editor.prototype.pickClass = function (id) {
    if (this.data.task === 'classify') { return this.commit([], id); }
    this.classIndex = id;
    const sel = this.selected;
    if (sel && sel.type === 'label' && this.labels[sel.index].classId !== id) {
      const labels = copy(this.labels);
      labels[sel.index].classId = id;
      return this.commit(labels, this.classId);
    }
    this.refresh();
  };

  Editor.prototype.remove = function () {
    const sel = this.selected;
    if (!sel) { return; }
    if (sel.type === 'proposal') { return this.reject([this.visibleProposals[sel.index].index]); }
    const labels = copy(this.labels), shape = this.shapes[sel.index], v = this.canvas.vertex;
    if (shape.kind === 'polygon' && v !== null && shape.points.length > 3) {  // a vertex, not the polygon
      const s = copy(shape);
      s.points.splice(v, 1);
      this.canvas.vertex = null;
      return this.change(sel.index, s);
    }
    labels.splice(sel.index, 1);
    this.selected = null;
    this.commit(labels, this.classId);
  };

  Editor.prototype.nudge = function (dx, dy) {
    const sel = this.selected;
    if (!sel || sel.type !== 'label') { return this.canvas.panBy(-dx * 4, -dy * 4); }
    this.change(sel.index, S.translate(this.shapes[sel.index], dx, dy, this.data.image.width, this.data.image.height));
  };
  Editor.prototype.rotate = function (degrees) {
    const sel = this.selected, shape = sel && sel.type === 'label' ? this.shapes[sel.index] : null;
    if (shape && shape.kind === 'obb') { this.change(sel.index, Object.assign({}, shape, {angle: shape.angle + degrees * Math.PI / 180})); }
  };
  Editor.prototype.cycle = function (delta) {
    const n = this.shapes.length;
    if (!n) { return; }
    const at = this.selected && this.selected.type === 'label' ? this.selected.index : (delta > 0 ? -1 : n);
    this.select({type: 'label', index: (at + delta + n) % n});
  };

  Editor.prototype.accept = function (indexes) {
    const taken = this.proposals.take(this.key, indexes);
    if (!taken.length) { return; }
    this.selected = null;
    // classify: a proposal is the image's class ({classId} only), saved as classId, never as a label
    if (this.data.task === 'classify') { return this.commit([], taken[taken.length - 1].classId); }
    this.commit(this.labels.concat(taken), this.classId);
  };
  Editor.prototype.reject = function (indexes) {
    this.proposals.take(this.key, indexes);
    this.selected = null;
    this.refresh();
  };
  Editor.prototype.acceptAll = function () { this.accept(this.visibleProposals.map(function (p) { return p.index; })); };
  Editor.prototype.rejectAll = function () { this.reject(this.visibleProposals.map(function (p) { return p.index; })); };

  window.LannerEditor = Editor;
})();
