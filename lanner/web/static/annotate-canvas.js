// The editor's canvas: an SVG whose #an-view group holds the image and the shapes in image pixels; its transform
// attribute zooms and pans (an attribute, not a style: the CSP allows it). Input is a small state machine
// (idle, drawing a box, drawing a polygon, placing keypoints, dragging a shape or a handle, panning); a finished
// gesture calls back the page once (onCreate/onChange), so each gesture is one undo step and one save.
(function () {
  'use strict';

  const NS = 'http://www.w3.org/2000/svg';
  const S = window.lannerShapes;
  const BOX_HANDLES = {nw: [0, 0], n: [0.5, 0], ne: [1, 0], e: [1, 0.5], se: [1, 1], s: [0.5, 1], sw: [0, 1], w: [0, 0.5]};

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }
  function pts(points) { return points.map(function (p) { return p[0].toFixed(1) + ',' + p[1].toFixed(1); }).join(' '); }

  function Canvas(options) {
    this.svg = document.getElementById('an-svg');
    this.view = document.getElementById('an-view');
    this.image = document.getElementById('an-image');
    this.layers = {labels: document.getElementById('an-labels'), proposals: document.getElementById('an-proposals'),
                   draft: document.getElementById('an-draft'), handles: document.getElementById('an-handles')};
    this.cb = options;            // onCreate(shape), onChange(index, shape), onSelect(sel), onHint(text)
    this.W = 1; this.H = 1; this.scale = 1; this.tx = 0; this.ty = 0;
    this.shapes = []; this.proposals = []; this.selected = null; this.vertex = null;
    this.tool = 'select'; this.classId = 0; this.kpt = {k: 0, dim: 3};
    this.state = {mode: 'idle'}; this.space = false;
    this.bind();
  }

  Canvas.prototype.setImage = function (url, W, H) {
    this.W = W; this.H = H;
    this.image.setAttribute('width', W); this.image.setAttribute('height', H);
    this.image.setAttribute('href', url || '');
    this.state = {mode: 'idle'};
    this.fit();
  };

  Canvas.prototype.size = function () {
    const box = this.svg.getBoundingClientRect();
    return {w: Math.max(box.width, 1), h: Math.max(box.height, 1)};
  };
  Canvas.prototype.applyView = function () {
    this.view.setAttribute('transform', 'translate(' + this.tx + ' ' + this.ty + ') scale(' + this.scale + ')');
    this.render();
  };
  Canvas.prototype.fit = function () {
    const s = this.size();
    this.moved = false;
    this.scale = Math.min(s.w / this.W, s.h / this.H) * 0.98;
    this.tx = (s.w - this.W * this.scale) / 2; this.ty = (s.h - this.H * this.scale) / 2;
    this.applyView();
  };
  Canvas.prototype.zoomBy = function (factor, cx, cy) {
    this.moved = true;
    const s = this.size();
    cx = cx === undefined ? s.w / 2 : cx; cy = cy === undefined ? s.h / 2 : cy;
    const next = Math.min(Math.max(this.scale * factor, 0.02), 64);
    this.tx = cx - (cx - this.tx) * next / this.scale; this.ty = cy - (cy - this.ty) * next / this.scale;
    this.scale = next;
    this.applyView();
  };
  Canvas.prototype.panBy = function (dx, dy) { this.moved = true; this.tx += dx; this.ty += dy; this.applyView(); };

  // The pointer in image pixels, and in the svg's own pixels (for panning and zooming).
  Canvas.prototype.point = function (evt) {
    const box = this.svg.getBoundingClientRect();
    const sx = evt.clientX - box.left, sy = evt.clientY - box.top;
    return {x: (sx - this.tx) / this.scale, y: (sy - this.ty) / this.scale, sx: sx, sy: sy};
  };

  Canvas.prototype.setData = function (shapes, proposals, selected) {
    this.shapes = shapes; this.proposals = proposals; this.selected = selected;
    if (!selected || selected.type !== 'label') { this.vertex = null; }
    this.render();
  };

  Canvas.prototype.cancel = function () {
    const had = this.state.mode !== 'idle';
    this.state = {mode: 'idle'};
    this.hint();
    this.render();
    return had;
  };

  Canvas.prototype.hint = function () {
    const st = this.state;
    let text = {select: 'Click a label to select it; drag to move; drag the empty image to pan.',
                box: 'Drag to draw a box.', obb: 'Drag to draw a box, then turn it with its round handle or [ ].',
                polygon: 'Click to add points; Enter or a click on the first point closes the polygon.',
                pose: 'Drag the box of the object, then click its keypoints in order.',
                classify: 'Pick the image’s class on the right, or press its number.'}[this.tool] || '';
    if (st.mode === 'polygon') { text = st.points.length + ' points: Enter closes, Backspace drops the last, Esc cancels.'; }
    if (st.mode === 'kpts') {
      text = 'Keypoint ' + (st.next + 1) + ' of ' + this.kpt.k + ': click it, or S if it is not visible. Esc cancels.';
    }
    this.cb.onHint(text);
  };

  // --- drawing ------------------------------------------------------------------------------------------------

  Canvas.prototype.drawShape = function (shape, parent, cls, attrs) {
    const c = ' ds-c' + (shape.classId % 10);
    const common = Object.assign({'class': 'ds-box an-shape ' + cls + c, 'vector-effect': 'non-scaling-stroke'}, attrs);
    const g = el('g', {}, parent);
    if (shape.kind === 'polygon') { el('polygon', Object.assign({points: pts(shape.points)}, common), g); }
    else if (shape.kind === 'obb') { el('polygon', Object.assign({points: pts(S.obbCorners(shape))}, common), g); }
    else { el('rect', Object.assign({x: shape.x, y: shape.y, width: shape.w, height: shape.h}, common), g); }
    if (shape.kind === 'pose') {
      const r = 3.5 / this.scale;
      S.skeleton(shape.kpts.length).forEach(function (e) {
        const a = shape.kpts[e[0]], b = shape.kpts[e[1]];
        if (a && b && a[2] && b[2]) {
          el('line', {x1: a[0], y1: a[1], x2: b[0], y2: b[1], 'class': 'an-bone' + c, 'vector-effect': 'non-scaling-stroke'}, g);
        }
      });
      shape.kpts.forEach(function (p, i) {
        if (p[2]) { el('circle', {cx: p[0], cy: p[1], r: r, 'class': 'an-kpt' + c, 'data-kpt': i}, g); }
      });
    }
    return g;
  };

  Canvas.prototype.render = function () {
    const self = this;
    Object.keys(this.layers).forEach(function (k) { self.layers[k].textContent = ''; });
    const drag = this.state.mode === 'drag' ? this.state : null;
    this.shapes.forEach(function (shape, i) {
      const s = drag && drag.index === i ? drag.shape : shape;
      const sel = self.selected && self.selected.type === 'label' && self.selected.index === i;
      self.drawShape(s, self.layers.labels, sel ? 'an-selected' : '', {'data-index': i});
    });
    const font = 12 / this.scale;
    this.proposals.forEach(function (p, i) {
      const sel = self.selected && self.selected.type === 'proposal' && self.selected.index === i;
      const g = self.drawShape(p.shape, self.layers.proposals, 'an-proposal' + (sel ? ' an-selected' : ''),
                               {'data-proposal': i});
      const b = p.shape.kind === 'obb' || p.shape.kind === 'polygon'
        ? S.bounds(p.shape.kind === 'obb' ? S.obbCorners(p.shape) : p.shape.points) : p.shape;
      const text = el('text', {x: b.x, y: Math.max(b.y - 3 / self.scale, font), 'font-size': font,
                               'class': 'an-conf ds-c' + (p.shape.classId % 10)}, g);
      text.textContent = p.confidence.toFixed(2);
    });
    this.renderDraft();
    this.renderHandles(drag);
  };

  Canvas.prototype.renderDraft = function () {
    const st = this.state, layer = this.layers.draft;
    const attrs = {'class': 'ds-box an-draft ds-c' + (this.classId % 10), 'vector-effect': 'non-scaling-stroke'};
    if (st.mode === 'rect' && st.box) {
      el('rect', Object.assign({x: st.box.x, y: st.box.y, width: st.box.w, height: st.box.h}, attrs), layer);
    } else if (st.mode === 'polygon') {
      const points = st.cursor ? st.points.concat([st.cursor]) : st.points;
      el('polyline', Object.assign({points: pts(points)}, attrs), layer);
      const r = 4 / this.scale;
      st.points.forEach(function (p, i) { el('circle', {cx: p[0], cy: p[1], r: r, 'class': 'an-handle' + (i ? '' : ' an-first')}, layer); });
    } else if (st.mode === 'kpts') {
      this.drawShape(st.shape, layer, 'an-draft', {});
    }
  };

  Canvas.prototype.renderHandles = function (drag) {
    if (!this.selected || this.selected.type !== 'label') { return; }
    const shape = drag && drag.index === this.selected.index ? drag.shape : this.shapes[this.selected.index];
    if (!shape) { return; }
    const layer = this.layers.handles, r = 5 / this.scale, self = this;
    function handle(x, y, attrs) { return el('circle', Object.assign({cx: x, cy: y, r: r, 'class': 'an-handle'}, attrs), layer); }
    if (shape.kind === 'polygon') {
      shape.points.forEach(function (p, i) {
        const q = shape.points[(i + 1) % shape.points.length];
        handle((p[0] + q[0]) / 2, (p[1] + q[1]) / 2, {'data-mid': i, 'class': 'an-handle an-mid', r: r * 0.7});
      });
      shape.points.forEach(function (p, i) {
        handle(p[0], p[1], {'data-vertex': i, 'class': 'an-handle' + (self.vertex === i ? ' an-vertex-selected' : '')});
      });
    } else if (shape.kind === 'obb') {
      const c = S.obbCorners(shape);
      c.forEach(function (p, i) { handle(p[0], p[1], {'data-corner': i}); });
      const top = [(c[0][0] + c[1][0]) / 2, (c[0][1] + c[1][1]) / 2], len = 24 / this.scale;
      const knob = [top[0] + Math.sin(shape.angle) * len, top[1] - Math.cos(shape.angle) * len];
      el('line', {x1: top[0], y1: top[1], x2: knob[0], y2: knob[1], 'class': 'an-bone', 'vector-effect': 'non-scaling-stroke'}, layer);
      handle(knob[0], knob[1], {'data-rotate': '1', 'class': 'an-handle an-rotate'});
    } else {
      Object.keys(BOX_HANDLES).forEach(function (name) {
        const f = BOX_HANDLES[name];
        handle(shape.x + f[0] * shape.w, shape.y + f[1] * shape.h, {'data-handle': name});
      });
      (shape.kpts || []).forEach(function (p, i) { if (p[2]) { handle(p[0], p[1], {'data-kpt': i, 'class': 'an-handle an-kpt-handle'}); } });
    }
  };

  // --- input --------------------------------------------------------------------------------------------------

  Canvas.prototype.bind = function () {
    const self = this, svg = this.svg;
    svg.addEventListener('pointerdown', function (evt) { self.down(evt); });
    svg.addEventListener('pointermove', function (evt) { self.move(evt); });
    svg.addEventListener('pointerup', function (evt) { self.up(evt); });
    svg.addEventListener('wheel', function (evt) {
      evt.preventDefault();
      const p = self.point(evt);
      self.zoomBy(evt.deltaY < 0 ? 1.15 : 1 / 1.15, p.sx, p.sy);
    }, {passive: false});
    new ResizeObserver(function () { if (!self.moved) { self.fit(); } }).observe(svg);
  };

  Canvas.prototype.down = function (evt) {
    const p = this.point(evt), t = evt.target, st = this.state, xy = [p.x, p.y];
    try { this.svg.setPointerCapture(evt.pointerId); } catch (e) { /* a synthetic event */ }
    if (evt.button === 1 || this.space) { this.state = {mode: 'pan', last: p, prev: st}; return; }
    if (evt.button !== 0) { return; }
    if (st.mode === 'polygon') { return this.polygonClick(xy); }
    if (st.mode === 'kpts') { return this.placeKpt([p.x, p.y, 2]); }
    const sel = this.selected && this.selected.type === 'label' ? this.selected.index : null;
    const d = t.dataset || {};
    if (sel !== null && t.parentNode === this.layers.handles && !('first' in d)) {
      const shape = JSON.parse(JSON.stringify(this.shapes[sel]));
      if (d.mid !== undefined) {  // a midpoint: a new vertex there, dragged at once
        const at = Number(d.mid) + 1;
        shape.points.splice(at, 0, xy);
        this.vertex = at;
        this.state = {mode: 'drag', index: sel, shape: shape, start: xy, orig: shape, part: {vertex: at}, moved: true};
        return this.render();
      }
      if (d.vertex !== undefined) { this.vertex = Number(d.vertex); }
      this.state = {mode: 'drag', index: sel, shape: shape, start: xy, orig: shape, part: d, moved: false};
      return this.render();
    }
    if (this.tool === 'select' || this.tool === 'classify') {
      if (d.index !== undefined) {
        const index = Number(d.index);
        this.cb.onSelect({type: 'label', index: index});
        const orig = JSON.parse(JSON.stringify(this.shapes[index]));
        this.state = {mode: 'drag', index: index, shape: orig, start: xy, orig: orig, part: {}, moved: false};
        return;
      }
      const target = t.closest ? t.closest('[data-proposal]') : null;
      if (d.proposal !== undefined || (target && target.dataset.proposal !== undefined)) {
        return this.cb.onSelect({type: 'proposal', index: Number((target || t).dataset.proposal)});
      }
      this.cb.onSelect(null);
      this.state = {mode: 'pan', last: p, prev: {mode: 'idle'}};
      return;
    }
    if (this.tool === 'polygon') { return this.polygonClick(xy); }
    this.state = {mode: 'rect', start: xy, box: null};  // box, obb, pose: drag a box
  };

  Canvas.prototype.move = function (evt) {
    const st = this.state;
    if (st.mode === 'idle' || st.mode === 'kpts') { return; }
    const p = this.point(evt), xy = [p.x, p.y];
    if (st.mode === 'pan') { this.moved = true; this.tx += p.sx - st.last.sx; this.ty += p.sy - st.last.sy; st.last = p; return this.applyView(); }
    if (st.mode === 'rect') { st.box = S.boxFrom(st.start, xy, this.W, this.H); return this.render(); }
    if (st.mode === 'polygon') { st.cursor = xy; return this.render(); }
    if (st.mode === 'drag') {
      st.moved = true;
      st.shape = this.dragged(st, xy);
      this.render();
    }
  };

  Canvas.prototype.dragged = function (st, xy) {
    const part = st.part, o = st.orig, W = this.W, H = this.H;
    const x = Math.min(Math.max(xy[0], 0), W), y = Math.min(Math.max(xy[1], 0), H);
    if (part.handle) { return S.resizeBox(o, part.handle, [x, y], W, H); }
    if (part.corner !== undefined) { return S.resizeObb(o, Number(part.corner), [x, y]); }
    if (part.rotate) { return Object.assign({}, o, {angle: Math.atan2(x - o.cx, -(y - o.cy))}); }
    const s = JSON.parse(JSON.stringify(o));
    if (part.vertex !== undefined) { s.points[Number(part.vertex)] = [x, y]; return s; }
    if (part.kpt !== undefined) { s.kpts[Number(part.kpt)] = [x, y, s.kpts[Number(part.kpt)][2]]; return s; }
    return S.translate(o, xy[0] - st.start[0], xy[1] - st.start[1], W, H);
  };

  Canvas.prototype.up = function () {
    const st = this.state;
    if (st.mode === 'pan') { this.state = st.prev && st.prev.mode !== 'pan' ? st.prev : {mode: 'idle'}; return; }
    if (st.mode === 'drag') {
      this.state = {mode: 'idle'};
      if (st.moved) { this.cb.onChange(st.index, st.shape); } else { this.render(); }
      return;
    }
    if (st.mode !== 'rect') { return; }
    const box = st.box;
    this.state = {mode: 'idle'};
    if (!box || box.w * this.scale < 3 || box.h * this.scale < 3) { return this.render(); }
    const cid = this.classId;
    if (this.tool === 'box') { this.cb.onCreate(Object.assign({kind: 'box', classId: cid}, box)); }
    else if (this.tool === 'obb') {
      this.cb.onCreate({kind: 'obb', classId: cid, cx: box.x + box.w / 2, cy: box.y + box.h / 2, w: box.w, h: box.h, angle: 0});
    } else if (this.tool === 'pose') {
      const kpts = [];
      for (let i = 0; i < this.kpt.k; i++) { kpts.push([0, 0, 0]); }
      this.state = {mode: 'kpts', next: 0, shape: Object.assign({kind: 'pose', classId: cid, kpts: kpts}, box)};
      this.hint();
      this.render();
    }
  };

  Canvas.prototype.polygonClick = function (xy) {
    const st = this.state;
    if (st.mode !== 'polygon') { this.state = {mode: 'polygon', points: [xy]}; this.hint(); return this.render(); }
    const first = st.points[0];
    if (st.points.length >= 3 && Math.hypot(first[0] - xy[0], first[1] - xy[1]) * this.scale < 8) { return this.closePolygon(); }
    st.points.push([Math.min(Math.max(xy[0], 0), this.W), Math.min(Math.max(xy[1], 0), this.H)]);
    this.hint();
    this.render();
  };
  Canvas.prototype.closePolygon = function () {
    const st = this.state;
    if (st.mode !== 'polygon' || st.points.length < 3) { return false; }
    this.state = {mode: 'idle'};
    this.hint();
    this.cb.onCreate({kind: 'polygon', classId: this.classId, points: st.points});
    return true;
  };
  Canvas.prototype.dropVertex = function () {
    const st = this.state;
    if (st.mode !== 'polygon') { return false; }
    st.points.pop();
    if (!st.points.length) { this.state = {mode: 'idle'}; }
    this.hint();
    this.render();
    return true;
  };

  // A keypoint placed (or skipped: v = 0); the last one finishes the shape.
  Canvas.prototype.placeKpt = function (kpt) {
    const st = this.state;
    if (st.mode !== 'kpts') { return false; }
    st.shape.kpts[st.next] = kpt;
    st.next += 1;
    if (st.next >= this.kpt.k) {
      this.state = {mode: 'idle'};
      this.hint();
      this.cb.onCreate(st.shape);
      return true;
    }
    this.hint();
    this.render();
    return true;
  };

  window.LannerCanvas = Canvas;
})();
