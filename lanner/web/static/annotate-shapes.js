// The editor's geometry: labels as the importers store them (normalised YOLO: {"classId", "bbox": [cx, cy, w, h],
// "segments": [x, y, ...], "keypoints": [x, y, v, ...], "obb": [x1, y1, ... x4, y4]}) to shapes in image pixels and
// back. A label that is not edited is never re-encoded, so what was imported stays exactly as it was.
(function () {
  'use strict';

  const DIGITS = 1e6;
  function round(v) { return Math.round(v * DIGITS) / DIGITS; }
  function clamp01(v) { return Math.min(1, Math.max(0, v)); }

  // Skeleton templates by keypoint count (the dataset stores only kpt_shape): COCO's person for 17 points,
  // otherwise a chain through the points in order.
  const COCO = [[15, 13], [13, 11], [16, 14], [14, 12], [11, 12], [5, 11], [6, 12], [5, 6], [5, 7], [6, 8], [7, 9],
                [8, 10], [1, 2], [0, 1], [0, 2], [1, 3], [2, 4], [3, 5], [4, 6]];
  function skeleton(k) {
    if (k === 17) { return COCO; }
    const edges = [];
    for (let i = 1; i < k; i++) { edges.push([i - 1, i]); }
    return edges;
  }

  // A stored label → a shape in pixels: {kind, classId, x, y, w, h (the box), points, kpts, angle}.
  function toShape(label, task, W, H, kptDim) {
    const shape = {classId: label.classId};
    if (label.obb) {
      const p = [];
      for (let i = 0; i < 8; i += 2) { p.push([label.obb[i] * W, label.obb[i + 1] * H]); }
      shape.kind = 'obb';
      shape.cx = (p[0][0] + p[1][0] + p[2][0] + p[3][0]) / 4;
      shape.cy = (p[0][1] + p[1][1] + p[2][1] + p[3][1]) / 4;
      shape.w = Math.hypot(p[1][0] - p[0][0], p[1][1] - p[0][1]);
      shape.h = Math.hypot(p[2][0] - p[1][0], p[2][1] - p[1][1]);
      shape.angle = Math.atan2(p[1][1] - p[0][1], p[1][0] - p[0][0]);
      return shape;
    }
    if (label.segments) {
      shape.kind = 'polygon';
      shape.points = [];
      for (let i = 0; i + 1 < label.segments.length; i += 2) {
        shape.points.push([label.segments[i] * W, label.segments[i + 1] * H]);
      }
      return shape;
    }
    const b = label.bbox || [0.5, 0.5, 0, 0];
    shape.kind = label.keypoints || task === 'pose' ? 'pose' : 'box';
    shape.x = (b[0] - b[2] / 2) * W; shape.y = (b[1] - b[3] / 2) * H; shape.w = b[2] * W; shape.h = b[3] * H;
    if (shape.kind === 'pose') {
      shape.kpts = [];
      const kp = label.keypoints || [];
      const dim = kptDim || 3;
      for (let i = 0; i + dim - 1 < kp.length; i += dim) {
        shape.kpts.push([kp[i] * W, kp[i + 1] * H, dim === 3 ? kp[i + 2] : 2]);
      }
    }
    return shape;
  }

  function obbCorners(s) {
    const c = Math.cos(s.angle), n = Math.sin(s.angle), hw = s.w / 2, hh = s.h / 2;
    return [[-hw, -hh], [hw, -hh], [hw, hh], [-hw, hh]].map(function (p) {
      return [s.cx + p[0] * c - p[1] * n, s.cy + p[0] * n + p[1] * c];
    });
  }

  function bounds(points) {
    const xs = points.map(function (p) { return p[0]; }), ys = points.map(function (p) { return p[1]; });
    const x = Math.min.apply(null, xs), y = Math.min.apply(null, ys);
    return {x: x, y: y, w: Math.max.apply(null, xs) - x, h: Math.max.apply(null, ys) - y};
  }

  function bbox(b, W, H) {
    const x0 = clamp01(b.x / W), y0 = clamp01(b.y / H), x1 = clamp01((b.x + b.w) / W), y1 = clamp01((b.y + b.h) / H);
    return [round((x0 + x1) / 2), round((y0 + y1) / 2), round(x1 - x0), round(y1 - y0)];
  }

  // A shape in pixels → the stored label (keys in the importers' order: classId, bbox, segments, keypoints, obb).
  function toLabel(shape, W, H, kptDim) {
    const label = {classId: shape.classId};
    if (shape.kind === 'box') {
      label.bbox = bbox(shape, W, H);
    } else if (shape.kind === 'polygon') {
      label.bbox = bbox(bounds(shape.points), W, H);
      label.segments = [];
      shape.points.forEach(function (p) { label.segments.push(round(clamp01(p[0] / W)), round(clamp01(p[1] / H))); });
    } else if (shape.kind === 'obb') {
      const corners = obbCorners(shape);
      label.bbox = bbox(bounds(corners), W, H);
      label.obb = [];
      corners.forEach(function (p) { label.obb.push(round(clamp01(p[0] / W)), round(clamp01(p[1] / H))); });
    } else if (shape.kind === 'pose') {
      label.bbox = bbox(shape, W, H);
      label.keypoints = [];
      shape.kpts.forEach(function (p) {
        const unset = kptDim === 3 && p[2] === 0;
        label.keypoints.push(unset ? 0 : round(clamp01(p[0] / W)), unset ? 0 : round(clamp01(p[1] / H)));
        if (kptDim === 3) { label.keypoints.push(p[2]); }
      });
    }
    return label;
  }

  // Every point of a shape, to move it as a whole or keep it inside the image.
  function translate(shape, dx, dy, W, H) {
    const s = JSON.parse(JSON.stringify(shape));
    if (s.kind === 'polygon') {
      const b = bounds(s.points);
      dx = Math.min(Math.max(dx, -b.x), W - b.x - b.w); dy = Math.min(Math.max(dy, -b.y), H - b.y - b.h);
      s.points = s.points.map(function (p) { return [p[0] + dx, p[1] + dy]; });
    } else if (s.kind === 'obb') {
      s.cx += dx; s.cy += dy;
    } else {
      dx = Math.min(Math.max(dx, -s.x), W - s.x - s.w); dy = Math.min(Math.max(dy, -s.y), H - s.y - s.h);
      s.x += dx; s.y += dy;
      if (s.kpts) { s.kpts = s.kpts.map(function (p) { return p[2] === 0 ? p : [p[0] + dx, p[1] + dy, p[2]]; }); }
    }
    return s;
  }

  // A box from two corners, inside the image.
  function boxFrom(a, b, W, H) {
    const x0 = Math.max(0, Math.min(a[0], b[0])), y0 = Math.max(0, Math.min(a[1], b[1]));
    const x1 = Math.min(W, Math.max(a[0], b[0])), y1 = Math.min(H, Math.max(a[1], b[1]));
    return {x: Math.min(x0, W), y: Math.min(y0, H), w: Math.max(0, x1 - x0), h: Math.max(0, y1 - y0)};
  }

  // Resize by one of the box's eight handles ('nw', 'n', ... 'w'): the opposite side stays.
  function resizeBox(s, handle, p, W, H) {
    let x0 = s.x, y0 = s.y, x1 = s.x + s.w, y1 = s.y + s.h;
    if (handle.indexOf('w') >= 0) { x0 = p[0]; }
    if (handle.indexOf('e') >= 0) { x1 = p[0]; }
    if (handle.indexOf('n') >= 0) { y0 = p[1]; }
    if (handle.indexOf('s') >= 0) { y1 = p[1]; }
    return Object.assign({}, s, boxFrom([x0, y0], [x1, y1], W, H));
  }

  // Resize a rotated box by corner i: the opposite corner stays, the angle too.
  function resizeObb(s, i, p) {
    const corners = obbCorners(s), fixed = corners[(i + 2) % 4];
    const c = Math.cos(s.angle), n = Math.sin(s.angle);
    const dx = p[0] - fixed[0], dy = p[1] - fixed[1];
    const u = dx * c + dy * n, v = -dx * n + dy * c;
    return Object.assign({}, s, {w: Math.abs(u), h: Math.abs(v), cx: fixed[0] + dx / 2, cy: fixed[1] + dy / 2});
  }

  function sameLabel(a, b) {
    return JSON.stringify(a) === JSON.stringify(b);
  }

  window.lannerShapes = {toShape: toShape, toLabel: toLabel, obbCorners: obbCorners, bounds: bounds,
                         translate: translate, boxFrom: boxFrom, resizeBox: resizeBox, resizeObb: resizeObb,
                         skeleton: skeleton, sameLabel: sameLabel, round: round};
})();
