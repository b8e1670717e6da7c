/* The capture page's photo shrinker, a dedicated worker, so shrinking the next photos never
 * holds up the page while earlier ones go up: each message {id, file, longEdge, targetBytes}
 * is answered {id, blob} (at most longEdge px on the long edge, JPEG, quality lowered until it
 * fits targetBytes; re-encoding drops EXIF) or {id, error} when this browser cannot. */
/* global OffscreenCanvas */
self.onmessage = function (event) {
  "use strict";
  var job = event.data || {};
  function answer(message) { message.id = job.id; self.postMessage(message); }
  createImageBitmap(job.file, { imageOrientation: "from-image" }).catch(function () {
    return createImageBitmap(job.file);
  }).then(function (bitmap) {
    var scale = Math.min(1, job.longEdge / Math.max(bitmap.width, bitmap.height));
    var canvas = new OffscreenCanvas(Math.round(bitmap.width * scale), Math.round(bitmap.height * scale));
    canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
    bitmap.close();
    var qualities = [0.8, 0.68, 0.55, 0.45];
    function attempt(i) {
      return canvas.convertToBlob({ type: "image/jpeg", quality: qualities[i] }).then(function (blob) {
        return blob.size > job.targetBytes && i + 1 < qualities.length ? attempt(i + 1) : blob;
      });
    }
    return attempt(0);
  }).then(function (blob) { answer({ blob: blob }); }, function (error) { answer({ error: String(error) }); });
};
