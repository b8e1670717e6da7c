/* Sending one kept ticket on a weak signal, shared by the capture page and its service worker:
 * the text first (small, safe to repeat by the phone's reference; its answer names the photos
 * the server holds), then each photo the server lacks, a piece at a time (Content-Range, from
 * the byte the server holds on), then the signature. Two pieces are on their way at once, half
 * a round apart, so the link never idles for a round trip while an answer comes back. Each
 * piece is sized from the signal measured on the last pieces (its rate and the wait beyond a
 * piece's bytes, told apart by fitting each piece's time to its size) to take PIECE_SECONDS
 * and a little more than a round trip (ROUNDS), never over LONGEST_PIECE seconds, so a drop
 * costs at most about that much. How far each photo
 * has come is remembered on the phone after every piece. Progress is what the server has
 * acknowledged, never what left the phone. "Sent" is said only when the server's own answer
 * lists every photo and the signature. There is no overall time limit; an upload that makes
 * no progress for STALL_MS is given up and tried again later. Both callers hold the same lock
 * while sending, so one phone never has two senders. */
/* exported CaptureSend */
var CaptureSend = (function () {
  "use strict";

  var STALL_MS = 45000;
  var PIECE_SECONDS = 0.8;
  var ROUNDS = 1.2;              // with two on their way, one is sent while the other is answered
  var LONGEST_PIECE = 2;         // seconds of sending: a cut loses the pieces under way
  var EARLY = 0.7;               // the next piece leaves when this share of the one before crossed
  var FIRST_PIECE = 32 * 1024;
  var MIN_PIECE = 16 * 1024;     // the server takes no smaller piece but a photo's last
  var MAX_PIECE = 1024 * 1024;
  var SAMPLES = 6;
  var PROGRESS_PREFIX = "progress:";
  var SENT_PREFIX = "sent:";
  var KEEP_SENT = 20;
  var LOCK = "capture-send";
  var REFUSED = [400, 404, 410, 413];
  var current = [];  // the uploads on their way, to give up at once when the phone loses signal
  var tried = {};     // the photo addresses sending began for on this page

  /* The phone says it has no signal: stop waiting on the uploads under way; they resume later. */
  function abort() { current.slice().forEach(function (request) { request.abort(); }); }

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

  /* One upload. XMLHttpRequest where there is one (its progress events show it moving), else fetch. */
  function upload(method, url, body, type, range) {
    var headers = { "Content-Type": type, "Accept": "application/json" };
    if (range) { headers["Content-Range"] = range; }
    if (typeof XMLHttpRequest === "undefined") {  // (the service worker)
      var controller = new AbortController();
      var going = { abort: function () { controller.abort(); }, bytes: body.size || 0 };
      var timer = setTimeout(going.abort, STALL_MS * 4);
      current.push(going);
      return fetch(url, { method: method, body: body, credentials: "omit", signal: controller.signal,
                          headers: headers })
        .then(function (response) {
          return response.json().catch(function () { return null; }).then(function (json) {
            return outcomeOf(response.status, json);
          });
        }).catch(function () { return { state: "later" }; })
        .then(function (outcome) {
          clearTimeout(timer);
          current.splice(current.indexOf(going), 1);
          return outcome;
        });
    }
    return new Promise(function (resolve) {
      var request = new XMLHttpRequest();
      var watchdog = null;
      function stalled() { request.abort(); }
      function nudge() { clearTimeout(watchdog); watchdog = setTimeout(stalled, STALL_MS); }
      request.open(method, url);
      Object.keys(headers).forEach(function (name) { request.setRequestHeader(name, headers[name]); });
      request.upload.onprogress = nudge;
      request.onload = function () {
        clearTimeout(watchdog);
        current.splice(current.indexOf(request), 1);
        var json = null;
        try { json = JSON.parse(request.responseText); } catch (e) { json = null; }
        resolve(outcomeOf(request.status, json));
      };
      request.onerror = request.onabort = request.ontimeout = function () {
        clearTimeout(watchdog);
        current.splice(current.indexOf(request), 1);
        resolve({ state: "later" });
      };
      nudge();
      request.bytes = body.size || 0;
      current.push(request);
      request.send(body);
    });
  }

  /* What the last pieces say of the signal: {rate} bytes a second and {rtt} seconds each
   * request waits beyond its bytes (round trip and the server's answer), fitted as a line
   * through the (size, seconds) of pieces that went alone; while they are too alike in size to
   * fit one, the round trip is kept and the rate read from the last piece beyond it. Pieces
   * answered one after another while both were on their way tell the rate by their spacing. */
  function Meter() {
    var samples = [], signal = { rate: 0, rtt: 0 };
    function learn(bytes, seconds) {
      seconds = Math.max(seconds, 0.001);
      samples.push([bytes, seconds]);
      if (samples.length > SAMPLES) { samples.shift(); }
      var n = samples.length, sx = 0, sy = 0, sxx = 0, sxy = 0;
      samples.forEach(function (s) { sx += s[0]; sy += s[1]; sxx += s[0] * s[0]; sxy += s[0] * s[1]; });
      var spread = n * sxx - sx * sx, slope = spread > 0 ? (n * sxy - sx * sy) / spread : 0;
      var rtt = slope > 0 ? (sy - slope * sx) / n : -1;
      // (no faster than four times the best piece went as a whole: a stalled piece skews a fit)
      var best = Math.max.apply(null, samples.map(function (s) { return s[0] / s[1]; }));
      var fitted = Math.sqrt(spread) / n > MIN_PIECE / 4 && rtt >= 0 && 1 / slope <= 4 * best;
      if (fitted) { signal.rtt = Math.min(rtt, 5); signal.rate = 1 / slope; return signal; }
      var sample = bytes / Math.max(seconds - signal.rtt, seconds / 4);
      signal.rate = signal.rate ? (signal.rate + sample) / 2 : sample;
      return signal;
    }
    /* A piece answered `seconds` after the one before it while both were on their way: the
     * link carried its bytes in that time, or faster when it idled between them. */
    function spaced(bytes, seconds) {
      // (two answers may come back to back: a rate grows by at most half at a time)
      var sample = Math.min(bytes / Math.max(seconds, 0.001), signal.rate ? 1.5 * signal.rate : Infinity);
      signal.rate = signal.rate ? (signal.rate + sample) / 2 : sample;
      return signal;
    }
    return { learn: learn, spaced: spaced, signal: signal };
  }

  /* The next piece's size for `left` bytes on `signal`: PIECE_SECONDS of sending and at least
   * ROUNDS round trips' worth, at most LONGEST_PIECE; a rest too small to be a piece of its own
   * goes with it. */
  function pieceSize(left, signal) {
    var size = FIRST_PIECE;
    if (signal && signal.rate) {
      size = Math.round(signal.rate * Math.min(LONGEST_PIECE, Math.max(PIECE_SECONDS, ROUNDS * signal.rtt)));
    }
    size = Math.max(MIN_PIECE, Math.min(MAX_PIECE, size));
    if (left <= size + Math.max(MIN_PIECE, size / 4)) { return left; }
    return size;
  }

  /* Seconds the phone still needs for `bytes` in `pieces` requests at the measured signal
   * (null until a piece has been measured). */
  function secondsLeft(bytes, pieces) {
    var signal = meter.signal;
    if (!signal.rate) { return null; }
    return bytes / signal.rate + Math.max(pieces || 1, 1) * signal.rtt;
  }

  var meter = Meter();

  /* Seconds within which the office's next answer is due: the bytes on their way and the next
   * piece's, at the measured rate, and a round trip (null until a piece was measured). */
  function answerDue() {
    var signal = meter.signal;
    if (!signal.rate) { return null; }
    var bytes = current.reduce(function (sum, going) { return sum + (going.bytes || 0); }, 0);
    return Math.min((bytes + pieceSize(Infinity, signal)) / signal.rate + signal.rtt, 30);
  }

  /* Where the server says a photo's next piece starts, from a 202 or a 409 upload_offset_mismatch. */
  function offsetOf(outcome) {
    var body = outcome.body || {};
    if (outcome.status === 202 && typeof body.offset === "number") { return body.offset; }
    var error = body.error || {};
    if (outcome.status === 409 && error.code === "upload_offset_mismatch" && error.details &&
        typeof error.details.offset === "number") { return error.details.offset; }
    return null;
  }

  /* Send a photo a piece at a time from byte `from`; acknowledged(offset) after each piece the
   * server kept. Two pieces go half a round apart: the next leaves once the bytes of the one
   * before should have crossed at the measured rate, so one's round trip is spent sending the
   * other; the server has long kept the first by the time the second is whole (a piece it
   * cannot place yet is answered with where it stands, and sending goes on from there once
   * the other is answered). lastLeaving(seconds), if given, is told when the photo's last
   * piece is on its way and when its bytes should have crossed. With `after` (the photo
   * before's sending), the last piece waits for it to settle, so the office keeps the photos
   * in the phone's order. Resolves with the outcome of the last piece (200 once the photo is
   * whole). */
  function sendPieces(url, blob, from, acknowledged, lastLeaving, after) {
    return new Promise(function (resolve) {
      var held = from >= 0 && from < blob.size ? from : 0, next = held, going = 0, mismatches = 0;
      var over = false, timer = null, due = 0, answered = 0;
      // A photo begun before (a drop, a reload) may be further along in the office than the
      // phone heard: it first sends the photo's last byte alone, whose answer is the photo (every
      // byte held) or where the office stands (409), for one byte instead of a piece sent round.
      var resuming = held > 0 || tried[url] === true;
      tried[url] = true;
      var ready = !after;  // the photo before settled: this one's last piece may go
      function finish(outcome) { if (!over) { over = true; clearTimeout(timer); resolve(outcome); } }
      function launch() {
        clearTimeout(timer);
        if (over || going >= 2 || next >= blob.size) { return; }  // (an answer launches again)
        if (going && due > Date.now()) { timer = setTimeout(launch, due - Date.now()); return; }
        // (two on their way from this phone at most, this photo's or the one before's)
        if (current.length >= 2) { timer = setTimeout(launch, 50); return; }
        var offset = next, started = Date.now(), size = pieceSize(blob.size - offset, meter.signal);
        if (resuming && blob.size - offset > 1) { offset = blob.size - 1; size = 1; }
        if (!ready && offset + size >= blob.size) { return; }  // (launched again once it settles)
        var range = "bytes " + offset + "-" + (offset + size - 1) + "/" + blob.size;
        // (a little early: a link the rate was short of fills, and shows its rate by the spacing)
        var leaves = meter.signal.rate && !resuming ? EARLY * size / meter.signal.rate : null;
        resuming = false;
        var alone = !current.length;
        next = offset + size;
        going += 1;
        due = leaves === null ? Infinity : started + leaves * 1000;
        if (leaves !== null && next < blob.size) { timer = setTimeout(launch, leaves * 1000); }
        if (next >= blob.size && lastLeaving) { lastLeaving(leaves); }
        upload("PUT", url, blob.slice(offset, offset + size), blob.type, range).then(function (outcome) {
          going -= 1;
          if (over) { return; }
          var at = offsetOf(outcome), now = Date.now();
          // (a photo's last answer waits on the server checking the whole photo: no measure of
          // the signal, once there is one)
          if (outcome.status === 202 || (outcome.status === 200 && !meter.signal.rate)) {
            if (alone && !current.length) { meter.learn(size, (now - started) / 1000); }
            else if (outcome.status === 202 && answered > started) { meter.spaced(size, (now - answered) / 1000); }
          }
          if (outcome.status === 202) { answered = now; }
          if (at === null || at >= blob.size) { finish(outcome); return; }
          if (outcome.status === 409) {
            mismatches += 1;
            if (mismatches > 3) { finish(outcome); return; }
            if (going) { return; }  // the piece before it is still on its way: its answer says more
            held = at;  // the server's word, even below what the phone thought it held
          } else { mismatches = 0; held = Math.max(held, at); }
          if (!going) { next = held; }
          Promise.resolve(acknowledged(held)).then(launch);
        });
      }
      if (after) { after.then(function () { ready = true; launch(); }); }
      launch();
    });
  }

  /* Resolves once fewer than two uploads are on their way from this phone. */
  function laneFree() {
    return new Promise(function (resolve) {
      (function check() { if (current.length < 2) { resolve(); } else { setTimeout(check, 50); } })();
    });
  }

  function codeOf(outcome) { return (((outcome && outcome.body) || {}).error || {}).code; }

  /* An answer that sending the same photo again can never change (a 409 about where a piece
   * starts is not one: the next try starts where the server says). */
  function refusedForGood(result) {
    if (result.status === 400 || result.status === 413) { return true; }
    return result.status === 409 && codeOf(result) !== "upload_offset_mismatch";
  }

  /* Whether a try that did not get through waits on the office (busy, out of space: a minute)
   * rather than on the signal (2, 4, then every 8 s). A piece that did not start where the
   * server's bytes end is not the office turning it away: the next try goes on from there. */
  function waitsOnOffice(outcome) {
    var status = outcome && outcome.status;
    if (!status || status === 408) { return false; }
    return !(status === 409 && (outcome.code || codeOf(outcome)) === "upload_offset_mismatch");
  }

  /* Why the office can never take a photo, in the crew's words' keys (the page says them). */
  function refusalOf(result) {
    if (result.status === 413) { return "too-big"; }
    if (result.status === 400) { return "not-usable"; }
    return codeOf(result) === "photos_full" ? "full" : codeOf(result) === "ticket_written" ? "written" : "other";
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

  function blank() { return { text: null, photos: {}, offsets: {}, refusals: {}, signature: false }; }

  /* Send one kept ticket part by part. store: idb-keyval; hooks.progress(step) tells the tray.
   * Resolves {state: "sent" | "refused" | "later", status, body}; "later" with `missing` when
   * the server's answer still lacks a photo or the signature the phone holds. */
  function send(entry, store, hooks) {
    hooks = hooks || {};
    var say = hooks.progress || function () {};
    var ref = entry.payload.client_ref;
    var photos = entry.payload.photos || [];
    var signature = entry.payload.signature && entry.payload.signature.image ? entry.payload.signature : null;
    var blobs = photos.map(function (photo) { return toBlob(photo.data_url); });
    var size = blobs.reduce(function (sum, blob) { return sum + blob.size; }, 0);
    var done, answer, acked = {};  // bytes of each photo the office acknowledged, by index

    function keep() { return store.set(PROGRESS_PREFIX + ref, done).catch(function () {}); }
    function holds(key) { return (answer.photo_keys || []).indexOf(key) >= 0; }
    /* The office's answer to a photo or the signature: the ticket as it stands, with every
     * photo and the signature any answer named (answers made side by side may each come before
     * the other was kept). */
    function heard(body) {
      if (!body) { return; }
      var keys = (answer.photo_keys || []).slice();
      (body.photo_keys || []).forEach(function (key) { if (keys.indexOf(key) < 0) { keys.push(key); } });
      var signed = answer.signed;
      answer = body;
      answer.photo_keys = keys;
      answer.signed = answer.signed || signed;
    }

    /* Where all the photos stand, by what the office acknowledged of each, told to the tray. */
    function tell(step, acknowledged) {
      var sent = 0, held = 0;
      blobs.forEach(function (blob, index) {
        var got = Math.min(acked[index] || 0, blob.size);
        sent += got;
        if (got >= blob.size) { held += 1; }
      });
      step.sent = sent;
      step.held = held;
      step.left = secondsLeft(size - sent, photos.length - held);
      step.due = answerDue();
      step.acknowledged = acknowledged;
      say(step);
    }

    /* One photo a piece at a time; lastLeaving and after as sendPieces takes them. Resolves
     * with null once the office kept it or can never take it, else with what stopped it. */
    function sendPhoto(index, lastLeaving, after) {
      var photo = photos[index], key = photoKey(photo, index), blob = blobs[index];
      var step = { part: "photo", number: index + 1, of: photos.length, total: blob.size, size: size };
      acked[index] = done.offsets[key] || 0;
      tell(step, false);  // where an earlier try stopped, not yet the office's word
      var coords = photo.coords || {};
      var url = partsBase(entry) + "/photos/" + encodeURIComponent(key) +
        query({ name: photo.name, taken_at: photo.taken_at, lat: coords.lat, lng: coords.lng });
      return sendPieces(url, blob, done.offsets[key] || 0, function (offset) {
        done.offsets[key] = acked[index] = offset;
        tell(step, true);
        return keep();
      }, lastLeaving, after).then(function (result) {
        if (result.state !== "sent" && !refusedForGood(result)) { return result; }
        // Kept by the server, or an image it can never take (not an image, too big, or a
        // ticket written or already holding 12 photos): either way, not sent again.
        if (result.state === "sent") {
          heard(result.body);
          done.photos[key] = true;
        } else {
          done.photos[key] = "refused";
          done.refusals[key] = { name: photo.name || "", why: refusalOf(result) };
        }
        delete done.offsets[key];
        acked[index] = blob.size;
        tell(step, true);  // its last piece, acknowledged
        return keep().then(function () { return null; });
      });
    }

    /* Each photo the office lacks in turn, the next leaving as the last piece of the one
     * before should have crossed (not once the office has made the photo of it), so the link
     * does not idle at every photo; lastLeft() once the last has left. Resolves with `outcome`,
     * or with what stopped a photo. */
    function sendPhotos(outcome, lastLeft) {
      return new Promise(function (resolve) {
        var index = -1, going = 0, stopped = null, before = null;
        function settle() { if (!going && (stopped || index >= photos.length)) { resolve(stopped || outcome); } }
        function next() {
          index += 1;
          if (!stopped && index === photos.length) { lastLeft(); }
          if (stopped || index >= photos.length) { settle(); return; }
          var key = photoKey(photos[index], index);
          if (holds(key) || done.photos[key] === "refused") { acked[index] = blobs[index].size; next(); return; }
          var followed = false;
          function follow() { if (!followed) { followed = true; next(); } }
          going += 1;
          before = sendPhoto(index, function (seconds) {
            if (seconds !== null) { setTimeout(follow, seconds * 1000); }
          }, before);
          before.then(function (result) {
            going -= 1;
            if (result) { stopped = stopped || result; settle(); return; }
            follow();
            settle();
          });
        }
        next();
      });
    }

    /* The signature, unless the office holds it already. Resolves with `outcome`, or with what
     * stopped it. */
    function sendSignature(outcome) {
      if (!signature || answer.signed || done.signature) { return Promise.resolve(outcome); }
      say({ part: "signature" });
      var blob = toBlob(signature.image);
      var url = partsBase(entry) + "/signature" +
        query({ name: signature.name, role: signature.role, signed_at: signature.signed_at,
                qualifier: signature.qualifier, qualifier_reason: signature.qualifier_reason });
      return laneFree().then(function () { return upload("PUT", url, blob, blob.type); }).then(function (result) {
        if (result.state === "sent") { heard(result.body); return outcome; }
        if (result.status === 400) {  // an image it can never use: not sent again
          done.signature = true;
          return keep().then(function () { return outcome; });
        }
        return result;
      });
    }

    return store.get(PROGRESS_PREFIX + ref).catch(function () { return null; }).then(function (found) {
      done = found || blank();
      done.offsets = done.offsets || {};
      done.refusals = done.refusals || {};
      say({ part: "text" });
      // Every time: safe to repeat, and its answer says which photos the server holds.
      return upload("POST", entry.url, JSON.stringify(textOf(entry.payload)), "application/json");
    }).then(function (outcome) {
      if (outcome.state !== "sent") { return outcome; }
      done.text = answer = outcome.body || {};
      // The signature leaves as the last photo's last piece should have crossed.
      var signing = null;
      function sign() { signing = signing || sendSignature(outcome); return signing; }
      return keep().then(function () { return sendPhotos(outcome, sign); }).then(function (result) {
        if (result.state === "sent") { return sign(); }
        return signing ? signing.then(function () { return result; }) : result;  // (nothing left on its way)
      });
    }).then(function (outcome) {
      if (outcome.state !== "sent") { return outcome; }
      var refused = photos.map(photoKey).filter(function (key) { return done.photos[key] === "refused"; });
      var refusals = refused.map(function (key) { return done.refusals[key] || { name: "", why: "other" }; });
      var missing = photos.map(photoKey).filter(function (key) {
        return done.photos[key] !== "refused" && !holds(key);
      }).length + (signature && !answer.signed && !done.signature ? 1 : 0);
      if (missing) { return { state: "later", status: 0, missing: missing }; }
      return { state: "sent", status: 200, body: done.text, photosRefused: refused.length,
               refusals: refusals };
    });
  }

  /* Remember a sent ticket on the phone (the tray's list, and what a correction starts from):
   * it replaces the ticket it corrected, and only the KEEP_SENT latest are kept. */
  function recordSent(store, entry, body, photosRefused, projectName, refusals) {
    var record = { reference: body.reference, sent_at: new Date().toISOString(), state: "sent",
                   photos_refused: photosRefused || 0, refusals: refusals || [],
                   project_name: entry.project_name || projectName || null, client_ref: entry.payload.client_ref,
                   description: entry.payload.description, url: entry.url, payload: entry.payload };
    var replaced = entry.payload.revises ? store.del(SENT_PREFIX + entry.payload.revises) : Promise.resolve();
    return replaced.then(function () {
      return store.set(SENT_PREFIX + entry.payload.client_ref, record);
    }).then(function () {
      return store.keys();
    }).then(function (keys) {
      var sent = keys.filter(function (key) { return String(key).indexOf(SENT_PREFIX) === 0; });
      if (sent.length <= KEEP_SENT) { return; }
      return Promise.all(sent.map(function (key) { return store.get(key).then(function (e) { return [key, e]; }); }))
        .then(function (pairs) {
          pairs.sort(function (a, b) { return (a[1] && a[1].sent_at) < (b[1] && b[1].sent_at) ? -1 : 1; });
          return Promise.all(pairs.slice(0, pairs.length - KEEP_SENT).map(function (pair) { return store.del(pair[0]); }));
        });
    }).catch(function () {});
  }

  function forget(store, ref) { return store.del(PROGRESS_PREFIX + ref).catch(function () {}); }

  /* A photo sent ahead while its ticket is still being written (PUT .../drafts/<ref>/photos/<key>),
   * a piece at a time like any other; onProgress(offset, total, acknowledged) before the first
   * piece (where an earlier try stopped) and after each piece the office kept; lastLeaving as
   * sendPieces tells it. */
  function stagePhoto(token, ref, photo, store, onProgress, lastLeaving) {
    var coords = photo.coords || {};
    var url = "/c/" + encodeURIComponent(token) + "/drafts/" + encodeURIComponent(ref) + "/photos/" +
      encodeURIComponent(photo.key) + query({ name: photo.name, taken_at: photo.taken_at, lat: coords.lat, lng: coords.lng });
    var blob = toBlob(photo.data_url);
    return progressOf(store, ref).then(function (done) {
      var from = done.offsets[photo.key] || 0;
      if (onProgress) { onProgress(from, blob.size, false); }
      return sendPieces(url, blob, from, function (offset) {
        if (onProgress) { onProgress(offset, blob.size, true); }
        return progressOf(store, ref).then(function (now) {
          now.offsets[photo.key] = offset;
          return store.set(PROGRESS_PREFIX + ref, now);
        }).catch(function () {});
      }, lastLeaving).then(function (result) {
        if (result.state === "sent" && onProgress) { onProgress(blob.size, blob.size, true); }
        if (result.state !== "sent" && refusedForGood(result)) {
          return { state: "refused", status: result.status, body: result.body };
        }
        return result;
      });
    });
  }

  function progressOf(store, ref) {
    return store.get(PROGRESS_PREFIX + ref).catch(function () { return null; }).then(function (found) {
      var done = found || blank();
      done.offsets = done.offsets || {};
      return done;
    });
  }

  /* Remember that the server holds a photo of this reference (its pieces are done with). */
  function markHeld(store, ref, key) {
    return progressOf(store, ref).then(function (done) {
      done.photos[key] = true;
      delete done.offsets[key];
      return store.set(PROGRESS_PREFIX + ref, done);
    }).catch(function () {});
  }

  if (typeof self !== "undefined" && self.addEventListener) { self.addEventListener("offline", abort); }

  return { send: send, withLock: withLock, forget: forget, abort: abort, stagePhoto: stagePhoto,
           markHeld: markHeld, recordSent: recordSent, waitsOnOffice: waitsOnOffice, codeOf: codeOf,
           secondsLeft: secondsLeft, answerDue: answerDue, Meter: Meter, pieceSize: pieceSize, PROGRESS_PREFIX: PROGRESS_PREFIX };
})();
