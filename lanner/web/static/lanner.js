// What every page's JavaScript shares (a static file: the CSP allows no inline script). Pages work without it;
// it adds: the CSRF header on htmx and fetch writes, errors of htmx requests shown in the message area, copy
// buttons, and dismissable messages.
(function () {
  'use strict';

  function csrfToken() {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : '';
  }

  // fetch() with the session's CSRF token: use it for every write a page script makes.
  function csrfFetch(url, options) {
    const opts = Object.assign({credentials: 'same-origin'}, options || {});
    opts.headers = Object.assign({'X-CSRFToken': csrfToken()}, opts.headers || {});
    return fetch(url, opts);
  }

  function showMessage(text, kind) {
    const area = document.getElementById('messages');
    if (!area) { return; }
    const box = document.createElement('div');
    box.className = 'flash flash-' + (kind || 'error');
    box.setAttribute('role', kind === 'error' ? 'alert' : 'status');
    const span = document.createElement('span');
    span.textContent = text;
    const close = document.createElement('button');
    close.type = 'button';
    close.setAttribute('aria-label', 'Dismiss');
    close.dataset.dismiss = '';
    close.textContent = '\u00d7';
    box.append(span, close);
    area.append(box);
  }

  function errorText(xhr) {
    if (!xhr) { return 'The server could not be reached. Check your connection and try again.'; }
    try {
      const body = JSON.parse(xhr.responseText);
      if (body && body.error) { return body.error; }
    } catch (e) { /* not JSON: fall through */ }
    return 'Request failed (' + xhr.status + ').';
  }

  document.addEventListener('htmx:configRequest', function (event) {
    event.detail.headers['X-CSRFToken'] = csrfToken();
  });
  document.addEventListener('htmx:responseError', function (event) {
    showMessage(errorText(event.detail.xhr), 'error');
  });
  document.addEventListener('htmx:sendError', function () { showMessage(errorText(null), 'error'); });

  function copy(button) {
    const target = document.getElementById(button.dataset.copy);
    if (!target) { return; }
    const text = target.value !== undefined ? target.value : target.textContent;
    const done = function (ok) {
      const label = button.querySelector('[data-copy-label]') || button;
      const before = label.textContent;
      label.textContent = ok ? 'Copied' : 'Press Ctrl+C to copy';
      setTimeout(function () { label.textContent = before; }, 2000);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { target.select(); done(false); });
    } else {
      if (target.select) { target.select(); }
      done(false);
    }
  }

  document.addEventListener('click', function (event) {
    const button = event.target.closest('[data-copy]');
    if (button) { copy(button); return; }
    const dismiss = event.target.closest('[data-dismiss]');
    if (dismiss) { dismiss.closest('.flash').remove(); }
  });
  // Copy buttons are hidden until this script can make them work (without it, the text can still be selected).
  function revealCopyButtons(root) {
    root.querySelectorAll('[data-copy][hidden]').forEach(function (b) { b.hidden = false; });
  }
  document.addEventListener('DOMContentLoaded', function () { revealCopyButtons(document); });
  document.addEventListener('htmx:load', function (event) { revealCopyButtons(event.detail.elt); });

  // Charts (uPlot) take their colours from the theme's CSS variables, so they follow light and dark.
  function cssColor(name, fallback) {
    const value = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return value || fallback;
  }
  function chartAxis(extra) {
    const grid = cssColor('--border', '#dde1e7');
    return Object.assign({stroke: cssColor('--muted', '#5b6475'), grid: {stroke: grid, width: 1},
                          ticks: {stroke: grid, width: 1}}, extra || {});
  }

  window.lanner = {csrfToken: csrfToken, fetch: csrfFetch, showMessage: showMessage, cssColor: cssColor,
                   chartAxis: chartAxis};
})();
