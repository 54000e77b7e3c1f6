// The label editor's page wiring: saves answered and conflicts, navigation (links, history, "label next"), the
// toolbar, and the keyboard: everything except drawing itself can be done without the mouse.
(function () {
  'use strict';

  const E = window.LannerEditor.prototype;
  function $(id) { return document.getElementById(id); }

  E.saved = function (key, body) {
    if (key !== this.key) { return; }
    this.revision = body.revision;
    if (this.data) { this.data.revision = body.revision; this.data.labelledBy = body.labelledBy; this.facts(); }
  };

  function summary(list, labels, classId, editor) {
    list.textContent = '';
    const counts = {};
    (labels || []).forEach(function (l) { const n = editor.className(l.classId); counts[n] = (counts[n] || 0) + 1; });
    if (editor.data && editor.data.task === 'classify') { counts['Image class: ' + editor.className(classId)] = 1; }
    Object.keys(counts).forEach(function (name) {
      const li = document.createElement('li');
      li.textContent = name + (counts[name] > 1 ? ' × ' + counts[name] : '');
      list.append(li);
    });
    if (!list.children.length) { const li = document.createElement('li'); li.textContent = 'No labels'; list.append(li); }
  }

  // A 409: the other person's version next to mine, and the choice. Until it is made, the image saves nothing.
  E.conflict = function (key, data, mine) {
    const cur = data.current, dialog = $('an-conflict'), self = this;
    this.conflictKey = key;
    $('an-conflict-message').textContent = (data.error || 'Someone changed this image since you opened it.') +
      (key !== this.key ? ' (image ' + key + ')' : '') + ' Their version is revision ' + cur.revision + '.';
    summary($('an-conflict-theirs'), cur.labels, cur.classId, this);
    summary($('an-conflict-mine'), mine && mine.labels, mine && mine.classId, this);
    if (!dialog.open) { dialog.showModal(); }
    $('an-keep-theirs').focus();
    dialog.dataset.key = key;
    dialog.onclose = null;
    self.resolving = true;
  };

  E.resolve = function (choice) {
    const key = this.conflictKey, dialog = $('an-conflict');
    this.resolving = false;
    if (dialog.open) { dialog.close(); }
    const current = this.sync.resolve(key, choice);
    if (key !== this.key) { return; }
    this.revision = current.revision;
    if (choice === 'theirs') {  // their version becomes this page's state (one more undo step)
      const h = this.histories[key];
      h.stack = h.stack.slice(0, h.index + 1).concat([{labels: current.labels || [], classId: current.classId}]);
      h.index = h.stack.length - 1;
      this.labels = JSON.parse(JSON.stringify(current.labels || []));
      this.classId = current.classId === undefined ? this.classId : current.classId;
      this.selected = null;
      this.refresh();
    }
  };

  E.go = function (key) {
    if (key && key !== this.key) { this.open(key, true); }
  };

  // "Label next" in a selection's queue (the editor opened with ?sel=: annotate_pages): the selection's next
  // unlabelled image (selection_pages.label_queue), and when none is left, says so and offers the whole dataset.
  E.queueNext = function () {
    const self = this, queue = this.config.queue;
    const leave = $('an-queue-leave');
    lanner.fetch(queue.next + '&after=' + encodeURIComponent(this.key))
      .then(function (r) { return r.json().then(function (d) { if (!r.ok) { throw new Error(d.error || r.status); } return d; }); })
      .then(function (d) {
        const count = queue.count.toLocaleString('en-US'), plural = queue.count === 1 ? '' : 's';
        if (d.next) {
          $('an-queue-text').textContent = 'Labelling ' + count + ' selected image' + plural + ' · ' +
            d.left.toLocaleString('en-US') + ' unlabelled';
          return self.go(d.next);
        }
        // this image's labels may still be on their way to the server, which then counts it as unlabelled
        const mine = self.labels.length > 0 || (self.classId !== null && self.classId !== undefined);
        if (d.left && !(d.left === 1 && mine)) {
          $('an-queue-text').textContent = 'This is the last unlabelled image of the ' + count + ' selected.';
          return lanner.showMessage('No other unlabelled image in the selection.', 'info');
        }
        $('an-queue-text').textContent = 'All ' + count + ' selected image' + plural + ' are labelled.';
        $('an-queue').dataset.done = 'true';
        leave.textContent = 'label the whole dataset';
        leave.href = self.config.page;
        lanner.showMessage('The selection is done: every selected image is labelled.', 'info');
      })
      .catch(function (err) { lanner.showMessage('The next image could not be found: ' + err.message, 'error'); });
  };

  // "Label next": the assistant's most uncertain unlabelled image; without an assistant, the next unlabelled one.
  E.labelNext = function () {
    const self = this, api = this.config.api;
    if (this.config.queue) { return this.queueNext(); }
    lanner.fetch(api + '/label-next?limit=5').then(function (r) { return r.ok ? r.json() : {images: []}; })
      .catch(function () { return {images: []}; })
      .then(function (data) {
        const next = (data.images || []).map(function (i) { return i.key; }).filter(function (k) { return k !== self.key; })[0];
        if (next) { return self.go(next); }
        return lanner.fetch(api + '/annotate/' + encodeURIComponent(self.key) + '?filter=unlabelled')
          .then(function (r) { return r.ok ? r.json() : null; }).then(function (d) {
            const key = d && d.neighbours && d.neighbours.next;
            if (key) { self.go(key); } else { lanner.showMessage('No unlabelled image left.', 'info'); }
          });
      });
  };

  function typing(target) {
    return target && (target.tagName === 'INPUT' || target.tagName === 'SELECT' || target.tagName === 'TEXTAREA');
  }

  E.key_ = function (evt) {
    const k = evt.key, ctrl = evt.ctrlKey || evt.metaKey, canvas = this.canvas;
    if (this.resolving || $('an-help').open) { return false; }
    if (typing(evt.target)) {
      if (evt.target.id === 'an-class-search' && k === 'Enter') { this.searchPick(); return true; }
      if (k === 'Escape') { evt.target.blur(); $('an-stage').focus(); return true; }
      return false;
    }
    if (ctrl && (k === 'z' || k === 'Z')) { this.step(evt.shiftKey ? 1 : -1); return true; }
    if (ctrl && (k === 'y' || k === 'Y')) { this.step(1); return true; }
    if (ctrl || evt.altKey) { return false; }
    const buttonFocused = evt.target && evt.target.tagName === 'BUTTON';
    if (k === 'Enter' && !buttonFocused) {
      if (canvas.closePolygon()) { return true; }
      if (this.selected && this.selected.type === 'proposal') { this.accept([this.visibleProposals[this.selected.index].index]); return true; }
      return false;
    }
    if (k === 'Escape') { if (!canvas.cancel()) { this.select(null); } return true; }
    if (k === 'Backspace' && canvas.dropVertex()) { return true; }
    if ((k === 'Delete' || k === 'Backspace')) { this.remove(); return true; }
    if ((k === 's' || k === 'S') && canvas.state.mode === 'kpts') { canvas.placeKpt([0, 0, 0]); return true; }
    if (k === 'Tab' && evt.target === $('an-stage') && this.shapes.length) { this.cycle(evt.shiftKey ? -1 : 1); return true; }
    const arrows = {ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1]};
    if (arrows[k] && !buttonFocused) { const f = evt.shiftKey ? 10 : 1; this.nudge(arrows[k][0] * f, arrows[k][1] * f); return true; }
    if (/^[0-9]$/.test(k)) { const id = (Number(k) + 9) % 10; if (id < (this.data.classNames || []).length) { this.pickClass(id); } return true; }
    const tools = {b: 'box', p: 'polygon', o: 'obb', k: 'pose', v: 'select'};
    const lower = k.toLowerCase();
    if (tools[lower] && !evt.shiftKey) { this.setTool(tools[lower]); return true; }
    const actions = {
      f: function () { this.go($('an-next').dataset.key); }, PageDown: function () { this.go($('an-next').dataset.key); },
      d: function () { this.go($('an-prev').dataset.key); }, PageUp: function () { this.go($('an-prev').dataset.key); },
      n: function () { this.labelNext(); }, a: function () { this.acceptAll(); }, x: function () { this.rejectAll(); },
      h: function () { this.toggleHidden(); }, '?': function () { $('an-help').showModal(); },
      '/': function () { $('an-class-search').focus(); }, '+': function () { canvas.zoomBy(1.25); },
      '=': function () { canvas.zoomBy(1.25); }, '-': function () { canvas.zoomBy(0.8); }, Home: function () { canvas.fit(); },
      '[': function () { this.rotate(evt.shiftKey ? -15 : -1); }, ']': function () { this.rotate(evt.shiftKey ? 15 : 1); },
      '{': function () { this.rotate(-15); }, '}': function () { this.rotate(15); },
    };
    const action = actions[k] || actions[lower];
    if (action) { action.call(this); return true; }
    if (k === ' ' && !buttonFocused) { canvas.space = true; return true; }
    return false;
  };

  E.searchPick = function () {
    const first = $('an-classes').querySelector('li:not([hidden]) button');
    if (first) { this.pickClass(Number(first.dataset.classId)); }
    $('an-stage').focus();
  };

  E.toggleHidden = function () {
    this.hidden = !this.hidden;
    $('an-hide').setAttribute('aria-pressed', String(this.hidden));
    $('an-hide').textContent = this.hidden ? 'Show labels' : 'Hide labels';
    this.refresh();
  };

  E.wire = function () {
    const self = this;
    const clicks = {
      'an-undo': function () { self.step(-1); }, 'an-redo': function () { self.step(1); },
      'an-delete': function () { self.remove(); }, 'an-zoom-in': function () { self.canvas.zoomBy(1.25); },
      'an-zoom-out': function () { self.canvas.zoomBy(0.8); }, 'an-fit': function () { self.canvas.fit(); },
      'an-hide': function () { self.toggleHidden(); }, 'an-help-open': function () { $('an-help').showModal(); },
      'an-help-close': function () { $('an-help').close(); }, 'an-label-next': function () { self.labelNext(); },
      'an-accept-all': function () { self.acceptAll(); }, 'an-reject-all': function () { self.rejectAll(); },
      'an-keep-theirs': function () { self.resolve('theirs'); }, 'an-keep-mine': function () { self.resolve('mine'); },
    };
    Object.keys(clicks).forEach(function (id) { $(id).addEventListener('click', clicks[id]); });
    ['an-prev', 'an-next'].forEach(function (id) {
      $(id).addEventListener('click', function (evt) { evt.preventDefault(); self.go($(id).dataset.key); });
    });
    $('an-conflict').addEventListener('cancel', function (evt) { evt.preventDefault(); });  // a choice is needed
    $('an-class-search').addEventListener('input', function () {
      const q = this.value.trim().toLowerCase();
      $('an-classes').querySelectorAll('li').forEach(function (li) {
        li.hidden = q !== '' && li.firstChild.dataset.name.indexOf(q) < 0;
      });
    });
    document.addEventListener('keydown', function (evt) { if (self.key_(evt)) { evt.preventDefault(); } });
    document.addEventListener('keyup', function (evt) { if (evt.key === ' ') { self.canvas.space = false; } });
    window.addEventListener('popstate', function (evt) {
      const key = (evt.state && evt.state.key) || self.config.key;
      if (key !== self.key) { self.open(key, false); }
    });
  };

  document.addEventListener('DOMContentLoaded', function () {
    const root = $('an-editor');
    if (!root) { return; }
    const editor = new window.LannerEditor(JSON.parse(root.dataset.editor));
    window.lannerEditor = editor;
    editor.wire();
    editor.open(editor.key, false).then(function () { editor.proposals.load(); $('an-stage').focus(); });
  });
})();
