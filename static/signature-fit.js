/* A signature pad (signature_pad 5) that never loses part of what is drawn when its box changes
 * size (a phone turned sideways, a draft opened on another screen): strokes stay where they
 * were while they fit, and are scaled down from the top left corner only as far as needed to
 * bring their far edges back inside. */
window.SignatureFit = (function () {
  "use strict";
  var EDGE = 3;  // CSS pixels kept clear at the far edges: half a pen's width and a little more

  /* Strokes (the pad's toData()) fitted into a box ({width, height}) in CSS pixels. */
  function fitted(data, box) {
    var right = 0, bottom = 0;
    data.forEach(function (stroke) {
      stroke.points.forEach(function (point) {
        right = Math.max(right, point.x);
        bottom = Math.max(bottom, point.y);
      });
    });
    var factor = Math.min(1, right > 0 ? (box.width - EDGE) / right : 1,
                          bottom > 0 ? (box.height - EDGE) / bottom : 1);
    if (factor >= 1) { return data; }
    return data.map(function (stroke) {
      var copy = {};
      Object.keys(stroke).forEach(function (key) { copy[key] = stroke[key]; });
      copy.points = stroke.points.map(function (p) {
        return { x: p.x * factor, y: p.y * factor, pressure: p.pressure, time: p.time };
      });
      return copy;
    });
  }

  /* Size the canvas to its box at the screen's pixel density and draw back what was on it,
   * fitted. Returns the box, or null while the pad is hidden (what is drawn stays until then). */
  function resize(pad, canvas) {
    var box = { width: canvas.offsetWidth, height: canvas.offsetHeight };
    if (!box.width || !box.height) { return null; }
    var ratio = Math.max(window.devicePixelRatio || 1, 1);
    var data = fitted(pad.toData(), box);
    canvas.width = Math.round(box.width * ratio);
    canvas.height = Math.round(box.height * ratio);
    canvas.getContext("2d").scale(ratio, ratio);
    pad.clear();
    pad.fromData(data);
    return box;
  }

  return { fitted: fitted, resize: resize };
})();
