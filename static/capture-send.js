/* Sending one kept ticket on a weak signal, shared by the capture page and its service worker:
 * the text first (small, safe to repeat by the phone's reference), then each photo and the
 * signature as its own upload of the image itself, each safe to repeat. What the server
 * has is remembered on the phone after every part, so a drop costs at most the part that
 * was on its way. There is no overall time limit; an upload that makes no progress for
 * STALL_MS is given up and tried again later. Both callers hold the same lock while sending,
 * so one phone never has two senders. */
/* exported CaptureSend */
var CaptureSend = (function () {
  "use strict";

  var STALL_MS = 45000;
  var PROGRESS_PREFIX = "progress:";
  var LOCK = "capture-send";
  var REFUSED = [400, 404, 410, 413];
  var current = null;  // the upload on its way, to give up at once when the phone loses signal

  /* The phone says it has no signal: stop waiting on the upload under way; it resumes later. */
  function abort() { if (current) { current.abort(); } }

  function withLock(work) {
    var locks = typeof navigator !== "undefined" && navigator.locks;
    if (locks && locks.request) { return locks.request(LOCK, work); }
    return work();
  }

  function toBlob(dataUrl) {
    var comma = dataUrl.indexOf(",");
    var head = dataUrl.slice(0, comma), text = atob(dataUrl.slice(comma + 1));
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i += 1) { bytes[i] = text.charCodeAt(i); }
    var type = /^data:([^;,]+)/.exec(head);
    return new Blob([bytes], { type: type ? type[1] : "application/octet-stream" });
  }

  function outcomeOf(status, body) {
    if (status === 200) { return { state: "sent", status: status, body: body }; }
    if (REFUSED.indexOf(status) >= 0) { return { state: "refused", status: status, body: body }; }
    return { state: "later", status: status, body: body };
  }

  /* One upload. XMLHttpRequest where there is one (it reports upload progress), else fetch. */
  function upload(method, url, body, type, onProgress) {
    if (typeof XMLHttpRequest === "undefined") {
      var controller = new AbortController();
      var timer = setTimeout(function () { controller.abort(); }, STALL_MS * 4);
      return fetch(url, { method: method, body: body, credentials: "omit", signal: controller.signal,
                          headers: { "Content-Type": type, "Accept": "application/json" } })
        .then(function (response) {
          return response.json().catch(function () { return null; }).then(function (json) {
            return outcomeOf(response.status, json);
          });
        }).catch(function () { return { state: "later" }; })
        .then(function (outcome) { clearTimeout(timer); return outcome; });
    }
    return new Promise(function (resolve) {
      var request = new XMLHttpRequest();
      var watchdog = null;
      function stalled() { request.abort(); }
      function nudge() { clearTimeout(watchdog); watchdog = setTimeout(stalled, STALL_MS); }
      request.open(method, url);
      request.setRequestHeader("Content-Type", type);
      request.setRequestHeader("Accept", "application/json");
      request.upload.onprogress = function (event) {
        nudge();
        if (onProgress && event.lengthComputable) { onProgress(event.loaded, event.total); }
      };
      request.onload = function () {
        clearTimeout(watchdog);
        current = null;
        var json = null;
        try { json = JSON.parse(request.responseText); } catch (e) { json = null; }
        resolve(outcomeOf(request.status, json));
      };
      request.onerror = request.onabort = request.ontimeout = function () {
        clearTimeout(watchdog);
        current = null;
        resolve({ state: "later" });
      };
      nudge();
      current = request;
      request.send(body);
    });
  }

  function partsBase(entry) { return entry.url.split("?")[0] + "/" + encodeURIComponent(entry.payload.client_ref); }

  function photoKey(photo, index) { return photo.key || "p" + (index + 1); }

  function query(fields) {
    var pairs = [];
    Object.keys(fields).forEach(function (name) {
      var value = fields[name];
      if (value !== undefined && value !== null && value !== "") {
        pairs.push(encodeURIComponent(name) + "=" + encodeURIComponent(String(value)));
      }
    });
    return pairs.length ? "?" + pairs.join("&") : "";
  }

  /* The ticket's text: everything but the images, with how many photos will follow. */
  function textOf(payload) {
    var text = {};
    Object.keys(payload).forEach(function (name) {
      if (name !== "photos" && name !== "signature") { text[name] = payload[name]; }
    });
    text.photos_expected = (payload.photos || []).length;
    text.photo_keys = (payload.photos || []).map(photoKey);  // photos sent ahead join by these
    return text;
  }

  /* Send one kept ticket part by part. store: idb-keyval; hooks.progress(words) tells the tray.
   * Resolves {state: "sent" | "refused" | "later", status, body}. */
  function send(entry, store, hooks) {
    hooks = hooks || {};
    var say = hooks.progress || function () {};
    var ref = entry.payload.client_ref;
    var photos = entry.payload.photos || [];
    var signature = entry.payload.signature && entry.payload.signature.image ? entry.payload.signature : null;
    var done;

    function keep() { return store.set(PROGRESS_PREFIX + ref, done).catch(function () {}); }

    return store.get(PROGRESS_PREFIX + ref).catch(function () { return null; }).then(function (found) {
      done = found || { text: null, photos: {}, signature: false };
      if (done.text) { return { state: "sent", status: 200, body: done.text }; }
      say({ part: "text" });
      return upload("POST", entry.url, JSON.stringify(textOf(entry.payload)), "application/json");
    }).then(function (outcome) {
      if (outcome.state !== "sent") { return outcome; }
      done.text = outcome.body;
      return keep().then(function () {
        return photos.reduce(function (chain, photo, index) {
          return chain.then(function (last) {
            if (last.state !== "sent") { return last; }
            var key = photoKey(photo, index);
            if (done.photos[key]) { return last; }
            say({ part: "photo", number: index + 1, of: photos.length });
            var coords = photo.coords || {};
            var url = partsBase(entry) + "/photos/" + encodeURIComponent(key) +
              query({ name: photo.name, taken_at: photo.taken_at, lat: coords.lat, lng: coords.lng });
            var blob = toBlob(photo.data_url);
            return upload("PUT", url, blob, blob.type, function (loaded, total) {
              say({ part: "photo", number: index + 1, of: photos.length, loaded: loaded, total: total });
            }).then(function (result) {
              if (result.state === "sent" || result.status === 400 || result.status === 409 ||
                  result.status === 413) {
                // Kept by the server, or an image it can never use (not an image, too big, or
                // a ticket written or already holding 12 photos): either way, not sent again.
                done.photos[key] = result.state === "sent" ? true : "refused";
                return keep().then(function () { return last; });
              }
              return result;
            });
          });
        }, Promise.resolve(outcome));
      });
    }).then(function (outcome) {
      if (outcome.state !== "sent" || !signature || done.signature) { return outcome; }
      say({ part: "signature" });
      var blob = toBlob(signature.image);
      var url = partsBase(entry) + "/signature" +
        query({ name: signature.name, role: signature.role, signed_at: signature.signed_at,
                qualifier: signature.qualifier, qualifier_reason: signature.qualifier_reason });
      return upload("PUT", url, blob, blob.type).then(function (result) {
        if (result.state === "sent" || result.status === 400) {
          done.signature = true;
          return keep().then(function () { return outcome; });
        }
        return result;
      });
    }).then(function (outcome) {
      if (outcome.state !== "sent") { return outcome; }
      var refused = Object.keys(done.photos).filter(function (key) { return done.photos[key] === "refused"; });
      return { state: "sent", status: 200, body: done.text, photosRefused: refused.length };
    });
  }

  function forget(store, ref) { return store.del(PROGRESS_PREFIX + ref).catch(function () {}); }

  /* A photo sent ahead while its ticket is still being written (PUT .../drafts/<ref>/photos/<key>). */
  function stagePhoto(token, ref, photo, onProgress) {
    var coords = photo.coords || {};
    var url = "/c/" + encodeURIComponent(token) + "/drafts/" + encodeURIComponent(ref) + "/photos/" +
      encodeURIComponent(photo.key) + query({ name: photo.name, taken_at: photo.taken_at, lat: coords.lat, lng: coords.lng });
    var blob = toBlob(photo.data_url);
    return upload("PUT", url, blob, blob.type, onProgress);
  }

  /* Remember that the server holds a photo of this reference, so sending skips it. */
  function markHeld(store, ref, key) {
    return store.get(PROGRESS_PREFIX + ref).catch(function () { return null; }).then(function (found) {
      var done = found || { text: null, photos: {}, signature: false };
      done.photos[key] = true;
      return store.set(PROGRESS_PREFIX + ref, done);
    }).catch(function () {});
  }

  if (typeof self !== "undefined" && self.addEventListener) { self.addEventListener("offline", abort); }

  return { send: send, withLock: withLock, forget: forget, abort: abort, stagePhoto: stagePhoto,
           markHeld: markHeld, PROGRESS_PREFIX: PROGRESS_PREFIX };
})();
