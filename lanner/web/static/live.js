// Live parts of a page (lanner/web/live.py streams them): every element with data-live-src opens an EventSource;
// each event (named by data-live-event, default "update") carries JSON whose keys fill the element's
// [data-live-field="key"] children, and is fired on the element as a "lanner:live" CustomEvent for page scripts.
// An "end" event closes the stream for good; otherwise the browser reconnects by itself after a drop.
(function () {
  'use strict';

  function connect(element) {
    const source = new EventSource(element.dataset.liveSrc);
    const name = element.dataset.liveEvent || 'update';
    source.addEventListener(name, function (event) {
      let data;
      try { data = JSON.parse(event.data); } catch (e) { return; }
      Object.keys(data).forEach(function (key) {
        element.querySelectorAll('[data-live-field="' + key + '"]').forEach(function (field) {
          field.textContent = data[key];
        });
      });
      element.dispatchEvent(new CustomEvent('lanner:live', {detail: data}));
    });
    source.addEventListener('end', function () { source.close(); });
    element.liveSource = source;
  }

  document.addEventListener('DOMContentLoaded', function () {
    document.querySelectorAll('[data-live-src]').forEach(connect);
  });
  window.addEventListener('pagehide', function () {
    document.querySelectorAll('[data-live-src]').forEach(function (e) { if (e.liveSource) { e.liveSource.close(); } });
  });
})();
