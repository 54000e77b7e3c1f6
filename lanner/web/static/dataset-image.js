// One image of a dataset: ← and → open the previous and next image (the grid's order), and a click on the
// image (or the Zoom button) shows it at its full size, scrolled inside its card.
(function () {
  'use strict';

  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  document.addEventListener('keydown', function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey || typing(event.target)) { return; }
    const link = document.getElementById(event.key === 'ArrowLeft' ? 'image-prev'
                                         : event.key === 'ArrowRight' ? 'image-next' : '');
    if (link) { event.preventDefault(); window.location.assign(link.href); }
  });

  document.addEventListener('DOMContentLoaded', function () {
    const figure = document.getElementById('ds-figure');
    const button = document.getElementById('ds-zoom');
    const image = document.getElementById('ds-image');
    if (!figure || !button || !image) { return; }
    function toggle() {
      const zoomed = figure.classList.toggle('ds-zoomed');
      button.setAttribute('aria-pressed', zoomed ? 'true' : 'false');
      button.textContent = zoomed ? 'Zoom out' : 'Zoom in';
    }
    button.addEventListener('click', toggle);
    image.addEventListener('click', toggle);
  });
})();
