// The map's points layer (map.js): deck.gl's ScatterplotLayer drawn as one point per image in a single
// non-instanced draw, instead of one instanced square (4 vertices) per image.
//
// Why: without a GPU, chromium draws WebGL on the CPU (SwiftShader), which pays for every instance of an
// instanced draw: the first frame of 100,000 instanced squares took 1.3-2.6 s there, the same points as one
// point list 0.3-0.6 s (benchmarks/map_view.py, docs/benchmarks.md). A GPU draws either in a frame.
//
// How: the layer's own shaders, with the quad's corner made the point's centre, the point's size set from the
// radius the layer computes, the circle cut with gl_PointCoord, and the picking colour taken from the vertex
// index (deck.gl's picking reads it from the instance index); its attributes stepped per vertex. Everything else
// (attributes, picking, the projection, colours) is deck.gl's. The shader edits are exact text replacements of
// deck.gl 9.4's shaders: if one no longer matches (another deck.gl), the layer draws as deck.gl's own
// ScatterplotLayer does (instanced squares: the same points, slower without a GPU) and says so in the console.
(function () {
  'use strict';

  const VERTEX = [
    ['in vec3 positions;', 'const vec3 positions = vec3(0.0);'],
    ['picking_getPickingColorFromInstanceID()', 'picking_getPickingColorFromIndex(float(gl_VertexID))'],
    ['vFillColor = vec4(instanceFillColors.rgb, instanceFillColors.a * layer.opacity);',
     'vFillColor = vec4(instanceFillColors.rgb, instanceFillColors.a * layer.opacity);\n' +
     'gl_PointSize = 2.0 * outerRadiusPixels;'],
  ];
  const FRAGMENT = [
    ['float distToCenter = length(unitPosition) * outerRadiusPixels;',
     'float distToCenter = length(gl_PointCoord * 2.0 - 1.0) * outerRadiusPixels;'],
  ];

  function edited(source, edits) {
    return edits.reduce(function (text, edit) {
      return text === null || text.indexOf(edit[0]) < 0 ? null : text.replace(edit[0], edit[1]);
    }, source);
  }

  class PointsLayer extends deck.ScatterplotLayer {
    initializeState() {
      super.initializeState();
      const shaders = super.getShaders();
      this.state.asPoints = edited(shaders.vs, VERTEX) !== null && edited(shaders.fs, FRAGMENT) !== null;
      if (!this.state.asPoints) {
        console.warn('lanner map: deck.gl\'s point shaders changed; drawing instanced squares instead');
        return;
      }
      const attributes = this.getAttributeManager().getAttributes();
      Object.keys(attributes).forEach(function (name) { attributes[name].settings.stepMode = 'vertex'; });
    }

    getShaders() {
      const shaders = super.getShaders();
      if (!this.state.asPoints) { return shaders; }
      return Object.assign({}, shaders, {vs: edited(shaders.vs, VERTEX), fs: edited(shaders.fs, FRAGMENT)});
    }

    _getModel() {
      const instanced = super._getModel();
      if (!this.state.asPoints) { return instanced; }
      const Model = instanced.constructor;  // luma.gl's, which deck.gl's bundle does not export
      instanced.destroy();
      return new Model(this.context.device, Object.assign({}, this.getShaders(), {
        id: this.props.id, bufferLayout: this.getAttributeManager().getBufferLayouts({isInstanced: false}),
        topology: 'point-list', isInstanced: false, vertexCount: 0}));
    }

    draw(options) {
      if (this.state.asPoints) { this.state.model.setVertexCount(this.getNumInstances()); }
      super.draw(options);
    }
  }
  PointsLayer.layerName = 'LannerPointsLayer';

  window.lannerMapPoints = {PointsLayer: PointsLayer};
}());
