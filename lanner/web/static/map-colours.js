// The map's colours (map.js): a category field (the server's names and a code per point) gets a 20-colour
// palette (repeating past 20) and a legend of its names with their counts; a number field (a value per point and
// its unit) gets the viridis ramp over its range, shown with the unit. A new per-image field from the server
// (lanner/embeddings/map_points.py) needs nothing here.
(function () {
  'use strict';

  const PALETTE = [[31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40], [148, 103, 189], [140, 86, 75],
    [227, 119, 194], [127, 127, 127], [188, 189, 34], [23, 190, 207], [174, 199, 232], [255, 187, 120],
    [152, 223, 138], [255, 152, 150], [197, 176, 213], [196, 156, 148], [247, 182, 210], [199, 199, 199],
    [219, 219, 141], [158, 218, 229]];
  const RAMP = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];  // viridis
  const LEGEND_ITEMS = 20;
  const NONE = [190, 190, 190];  // a number field's point without a value (an image not scored)

  function ramp(t) {
    const at = Math.max(0, Math.min(1, t)) * (RAMP.length - 1);
    const i = Math.min(RAMP.length - 2, Math.floor(at));
    const f = at - i;
    return RAMP[i].map(function (c, k) { return Math.round(c + (RAMP[i + 1][k] - c) * f); });
  }

  function range(values) {
    let lo = Infinity;
    let hi = -Infinity;
    for (let i = 0; i < values.length; i++) {
      if (values[i] !== null) { lo = Math.min(lo, values[i]); hi = Math.max(hi, values[i]); }
    }
    return lo <= hi ? [lo, hi] : [0, 0];
  }

  // point index -> [r, g, b] for ``field``
  function colourOf(field) {
    if (field.kind !== 'number') {
      return function (i) { return PALETTE[field.codes[i] % PALETTE.length]; };
    }
    const [lo, hi] = range(field.values);
    return function (i) {
      const value = field.values[i];
      return value === null ? NONE : ramp(hi > lo ? (value - lo) / (hi - lo) : 0.5);
    };
  }

  function swatch(rgb) {
    const dot = document.createElement('span');
    dot.className = 'map-swatch';
    dot.style.backgroundColor = 'rgb(' + rgb.join(',') + ')';  // the CSSOM, which the CSP allows
    return dot;
  }

  // the legend of ``field`` over its ``n`` points, in ``box``: names with their counts, or the ramp's range
  function legend(box, field, n) {
    box.replaceChildren();
    if (field.kind === 'number') {
      const [lo, hi] = range(field.values);
      const bar = document.createElement('canvas');
      bar.width = 160; bar.height = 10; bar.className = 'map-ramp';
      const ctx = bar.getContext('2d');
      for (let x = 0; x < bar.width; x++) {
        ctx.fillStyle = 'rgb(' + ramp(x / (bar.width - 1)).join(',') + ')';
        ctx.fillRect(x, 0, 1, bar.height);
      }
      const low = document.createElement('span');
      low.textContent = lo + ' ';
      const high = document.createElement('span');
      high.textContent = ' ' + hi + ' ' + field.unit;
      box.append(field.label + ': ', low, bar, high);
      const unscored = field.values.filter(function (v) { return v === null; }).length;
      if (unscored) {
        const none = document.createElement('span');
        none.className = 'muted';
        none.append(' ', swatch(NONE), unscored.toLocaleString('en') + ' image' + (unscored === 1 ? '' : 's')
          + ' without a value');
        box.append(none);
      }
      return;
    }
    const counts = new Array(field.names.length).fill(0);
    for (let i = 0; i < n; i++) { counts[field.codes[i]] += 1; }
    const order = counts.map(function (c, i) { return i; }).filter(function (i) { return counts[i] > 0; })
      .sort(function (a, b) { return counts[b] - counts[a]; });
    const list = document.createElement('ul');
    list.className = 'map-legend-list';
    order.slice(0, LEGEND_ITEMS).forEach(function (code) {
      const item = document.createElement('li');
      item.append(swatch(PALETTE[code % PALETTE.length]), field.names[code] + ' ');
      const count = document.createElement('span');
      count.className = 'muted';
      count.textContent = counts[code].toLocaleString('en') + ' image' + (counts[code] === 1 ? '' : 's');
      item.append(count);
      list.append(item);
    });
    if (order.length > LEGEND_ITEMS) {
      const more = document.createElement('li');
      more.className = 'muted';
      more.textContent = (order.length - LEGEND_ITEMS) + ' more (colours repeat)';
      list.append(more);
    }
    box.append(list);
  }

  window.lannerMapColours = {colourOf: colourOf, legend: legend};
})();
