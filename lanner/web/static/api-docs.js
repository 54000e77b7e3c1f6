// The API reference (/docs): starts the vendored Swagger UI on this server's OpenAPI document. A static file,
// not FastAPI's inline script, so the page runs under the Content-Security-Policy (lanner/web/docs_pages.py).
"use strict";
(function () {
  var root = document.getElementById("swagger-ui");
  window.ui = window.SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    domNode: root,
    layout: "BaseLayout",
    presets: [window.SwaggerUIBundle.presets.apis, window.SwaggerUIBundle.SwaggerUIStandalonePreset],
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,  // Swagger UI would send the document to validator.swagger.io
  });
})();
