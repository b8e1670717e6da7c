/* Capture page: rows, photo compression, signature, a draft kept as the crew types, a
 * status tray that is always on screen, and a queue on the phone so a ticket written on
 * one bar of signal is never lost. Every ticket carries a client reference, so sending
 * it again can never make a second ticket. */
(function () {
  "use strict";

  var MAX_PHOTOS = 12;
  var EXIF_BYTES = 128 * 1024;  // EXIF sits in the first 64 KB of a camera's JPEG
  var LONG_EDGE = 2048;
  var TARGET_BYTES = 350 * 1024;
  var QUEUE_PREFIX = "ticket:";
  var REFUSED_PREFIX = "refused:";
  var SENT_PREFIX = "sent:";
  var correcting = null;    // the client reference of a sent-back ticket being corrected
  var correctingReference = null;
  var ROW_KINDS = ["labor", "equipment", "materials"];
  var store = window.idbKeyval;
  var form = document.getElementById("ticket-form");
  if (!form) { return; }
  document.documentElement.classList.add("js");
  sayWhichFormWasOpened();

  var token = form.getAttribute("data-token");
  var projectId = form.getAttribute("data-project-id");
  var projectName = form.getAttribute("data-project-name");
  var DRAFT_KEY = "draft:" + token;
  var DRAFT_PHOTOS_KEY = "draft-photos:" + token;
  var ME_KEY = "capture-me";
  var statusBox = document.getElementById("queue-status");
  var trayActions = document.getElementById("tray-actions");
  var undoBar = document.getElementById("undo-bar");
  var ticketList = document.getElementById("phone-tickets");
  var trayToggle = document.getElementById("tray-toggle");
  var progress = document.getElementById("upload-progress");
  var photoList = document.getElementById("photo-list");
  var photoInputs = form.querySelectorAll("input[type=file][data-photos]");
  var projectNotice = document.getElementById("project-notice");
  var schemaText = form.getAttribute("data-schema");
  var schema = schemaText ? JSON.parse(schemaText) : null;  // the server's own rules for a ticket
  var photos = [];
  var rowCounter = 100;
  var signaturePad = null;
  var padBox = null;        // the signature pad's size in CSS pixels, once shown
  var signatureImage = null;
  var sending = false;
  var restoredKey = null;
  var draftTimer = null;
  var draftReady = false;
  var draftRef = null;      // the phone's reference for the ticket being written
  var photosRef = null;     // the reference of the ticket `photos` belongs to: kept only while it is draftRef
  var staging = false;
  var restage = false;       // asked to send photos ahead while a turn was under way
  var onTheWay = {};        // bytes the office acknowledged of each photo going ahead, by key
  var preparing = Promise.resolve();  // photos being shrunk: Send waits for them
  var preparingStep = null; // {number, count} while a photo is shrunk, for the tray

  var LANG = document.documentElement.lang || "en";
  // The page's words in the crew's language (one catalog with the server's), {name} filled in.
  var catalog = window.CrewWords(JSON.parse(form.getAttribute("data-messages") || "{}"), LANG);
  var t = catalog.t, tn = catalog.tn;

  function num(value) { return new Intl.NumberFormat(LANG).format(value); }

  /* With no signal, a form of this link (QR code, text message, plain link) may open from the
   * copy kept of another: its tickets still say which one the crew opened, from the address. */
  function sayWhichFormWasOpened() {
    var end = /^\/c\/[^/]+\/([qs])$/.exec(location.pathname);
    var via = end ? { q: "qr", s: "sms" }[end[1]] : "link";
    if (form.getAttribute("data-via") === via) { return; }
    ["action", "data-submit-url"].forEach(function (name) {
      var address = new URL(form.getAttribute(name), location.href);
      address.searchParams.set("via", via);
      form.setAttribute(name, address.pathname + address.search);
    });
    form.setAttribute("data-via", via);
    form.elements.namedItem("via").value = via;
  }

  /* How many photos the office could never take, and why, each by its name ("Sent back: ..."). */
  function photosRefusedWords(count, refusals) {
    var words = tn("{count} photo could not be used.", "{count} photos could not be used.", count, { count: num(count) });
    (refusals || []).forEach(function (refusal) {
      var why = { "not-usable": t("it is not a picture the office can open"), "too-big": t("it is too big"),
                  "full": t("a ticket holds at most 12 photos"), "written": t("the ticket was already accepted")
                }[refusal.why] || t("the office could not take it");
      words += " " + t("Sent back: {name} ({reason}).", { name: refusal.name || t("a photo"), reason: why });
    });
    return words;
  }

  function newClientRef() {
    if (window.crypto && crypto.randomUUID) { return crypto.randomUUID(); }
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) { return ("0" + b.toString(16)).slice(-2); }).join("");
  }

  function clock(iso) {
    var when = iso ? new Date(iso) : new Date();
    return when.toLocaleTimeString(LANG, { hour: "2-digit", minute: "2-digit" });
  }

  /* ---- The tray: one line saying what happened, actions, and this phone's tickets. ---- */

  /* The tray's one line. "Sending" stands only while the office acknowledges bytes: with no
   * answer for STALE_MS, or for `dueMs` when a slow signal answers a piece less often, it says
   * so instead. */
  var STALE_MS = 1000;
  var staleTimer = null;

  function showStatus(kind, text, dueMs) {
    statusBox.className = "queue-status " + kind;
    statusBox.textContent = text;
    statusBox.title = text;
    trayActions.textContent = "";
    clearTimeout(staleTimer);
    if (kind === "sending") {
      staleTimer = setTimeout(function () {
        showStatus(navigator.onLine === false ? "saved" : "waiting-answer",
                   navigator.onLine === false ? t("Waiting for signal") : t("Waiting for an answer…"));
      }, Math.max(STALE_MS, dueMs || 0));
    }
    if (kind !== "saved") { stopCountdown(); }
  }

  function trayButton(text, onClick) {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "secondary";
    button.textContent = text;
    button.addEventListener("click", onClick);
    trayActions.appendChild(button);
    return button;
  }

  function offerUndo(text, undo) {
    undoBar.textContent = "";
    var words = document.createElement("span");
    words.textContent = text;
    var button = document.createElement("button");
    button.type = "button";
    button.className = "undo";
    button.textContent = t("Undo");
    button.addEventListener("click", function () {
      undoBar.hidden = true;
      undoBar.textContent = "";
      undo();
      saveDraft();
    });
    undoBar.appendChild(words);
    undoBar.appendChild(button);
    undoBar.hidden = false;
  }

  function refusedReason(entry) {
    if (entry.status === 404 || entry.status === 410) { return t("This link was closed by the office"); }
    if (entry.status === 413) { return t("the photos are too big"); }
    return t("some fields need fixing");
  }

  function listEntries() {
    if (!store) { return Promise.resolve([]); }
    return store.entries().then(function (pairs) {
      return pairs.filter(function (pair) {
        var key = String(pair[0]);
        return key.indexOf(QUEUE_PREFIX) === 0 || key.indexOf(REFUSED_PREFIX) === 0 ||
          key.indexOf(SENT_PREFIX) === 0;
      }).map(function (pair) {
        var key = String(pair[0]), entry = pair[1] || {};
        var state = key.indexOf(QUEUE_PREFIX) === 0 ? "waiting"
          : key.indexOf(REFUSED_PREFIX) === 0 ? "sent-back" : (entry.state || "sent");
        return { key: key, state: state, entry: entry,
                 when: entry.sent_at || entry.saved_at || "" };
      }).sort(function (a, b) { return a.when < b.when ? 1 : -1; });
    }).catch(function () { return []; });
  }

  function describe(item) {
    var entry = item.entry;
    var title = (entry.payload && entry.payload.description) || entry.description || t("Ticket");
    var project = entry.project_name ? entry.project_name + ": " : "";
    var state;
    if (item.state === "waiting") { state = t("Waiting to send"); }
    else if (item.state === "sent-back") {
      state = linkGone(entry) ? refusedReason(entry) : t("Sent back: {reason}", { reason: entry.reason || refusedReason(entry) });
    }
    else {
      state = t("Sent {reference} {time}", { reference: entry.reference, time: clock(entry.sent_at) });
      if (entry.photos_refused) { state += ". " + photosRefusedWords(entry.photos_refused, entry.refusals); }
    }
    return { title: project + title.slice(0, 60), state: state };
  }

  function refreshTray() {
    return listEntries().then(function (items) {
      ticketList.textContent = "";
      items.forEach(function (item) {
        var words = describe(item);
        var li = document.createElement("li");
        li.className = "phone-ticket " + item.state;
        li.setAttribute("data-state", item.state);
        var title = document.createElement("span");
        title.className = "ticket-title";
        title.textContent = words.title;
        var state = document.createElement("strong");
        state.className = "ticket-state";
        state.textContent = words.state;
        li.appendChild(title);
        li.appendChild(state);
        ticketList.appendChild(li);
      });
      trayToggle.textContent = num(items.length);  // the words are its name; the line keeps room for the tray's
      trayToggle.setAttribute("aria-label", t("This phone's tickets") + " " + num(items.length));
      return items;
    });
  }

  function waitingCount() {
    return listEntries().then(function (items) {
      return items.filter(function (item) { return item.state === "waiting"; }).length;
    });
  }

  /* Something waits to go: why, in one line; "Waiting for signal" only when the phone is
   * offline, else when the next try starts, counted down. */
  var countdown = null;

  function stopCountdown() { if (countdown) { clearInterval(countdown); countdown = null; } }

  function showWaiting(prefix) {
    prefix = prefix || "";
    if (navigator.onLine === false) { showStatus("saved", prefix + t("Waiting for signal")); return Promise.resolve(); }
    if (!retryTimer) { showStatus("saved", prefix + t("Waiting to send")); return Promise.resolve(); }
    function tick() {
      if (navigator.onLine === false) { statusBox.textContent = prefix + t("Waiting for signal"); return; }
      var seconds = Math.max(1, Math.ceil((retryAt - Date.now()) / 1000));
      statusBox.textContent = prefix + t("Trying again in {seconds} s", { seconds: num(seconds) });
      statusBox.title = statusBox.textContent;
    }
    showStatus("saved", "");
    tick();
    countdown = setInterval(function () { if (retryTimer) { tick(); } else { stopCountdown(); } }, 1000);
    return Promise.resolve();
  }

  function showQuietState() {
    return refreshTray().then(function (items) {
      if (preparingStep && !form.hidden) { showPreparing(); return; }
      var waiting = items.filter(function (item) { return item.state === "waiting"; });
      if (waiting.length) { return showWaiting(); }
      if (correcting && !form.hidden) { showCorrecting(); return; }
      if (!form.hidden && photos.some(function (photo) { return !photo.staged && !photo.held; })) {
        return showWaiting();
      }
      var last = items[0];
      if (!last) { showStatus("idle", t("Nothing waiting to send.")); return; }
      var words = describe(last);
      showStatus(last.state === "sent-back" ? "refused" : "sent", words.state);
    });
  }

  function openList(open) {
    ticketList.hidden = !open;
    trayToggle.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) { refreshTray(); }
  }

  trayToggle.addEventListener("click", function () { openList(ticketList.hidden); });

  /* The page ends above the tray, so the tray never covers the form (the Send button, the
   * bottom of the signature pad), upright or on its side. */
  function makeRoomForTray() {
    var tray = document.getElementById("tray");
    var height = Math.ceil(tray.querySelector(".tray-main").getBoundingClientRect().height) + 24;
    document.body.style.paddingBottom = height + "px";
    document.documentElement.style.scrollPaddingBottom = height + "px";
  }
  if (window.ResizeObserver) { new ResizeObserver(makeRoomForTray).observe(document.getElementById("tray")); }
  window.addEventListener("resize", makeRoomForTray);
  makeRoomForTray();
  // Back to the form: the list folds away so it never covers what the crew is filling in.
  form.addEventListener("focusin", function () { if (!ticketList.hidden) { openList(false); } });

  /* ---- Rows ---- */

  /* "+ Add line": a fresh copy of the kind's first row, at once and with no signal. */
  form.addEventListener("click", function (event) {
    var add = event.target.closest(".add-row");
    if (!add || !rowTemplates[add.getAttribute("data-kind")]) { return; }
    var row = cloneRow(rowTemplates[add.getAttribute("data-kind")]);
    form.querySelector('.rows[data-kind="' + add.getAttribute("data-kind") + '"]').appendChild(row);
    var first = row.querySelector("input, select");
    if (first) { first.focus(); }
    saveDraft();
  });

  form.addEventListener("click", function (event) {
    var button = event.target.closest(".remove-row");
    if (!button) { return; }
    var row = button.closest(".row");
    if (!row) { return; }
    var box = row.parentNode, next = row.nextSibling;
    row.remove();
    saveDraft();
    offerUndo(t("Line removed."), function () { box.insertBefore(row, next && next.parentNode === box ? next : null); });
  });

  /* A fresh copy of a kind's first row, numbered so no two rows share a field name. */
  function cloneRow(template) {
    rowCounter += 1;
    var row = template.cloneNode(true);
    row.querySelectorAll("[name], [data-error-for]").forEach(function (element) {
      ["name", "data-error-for"].forEach(function (attribute) {
        var text = element.getAttribute(attribute);
        if (text) { element.setAttribute(attribute, text.replace(/\[\d+\]/, "[" + rowCounter + "]")); }
      });
    });
    return blankRow(row);
  }

  /* An empty copy of a row: no values (not even as defaults a form.reset() would bring back),
   * the first choice of each pick list, and none of the server's error marks. */
  function blankRow(row) {
    row.querySelectorAll("input, textarea").forEach(function (input) {
      input.removeAttribute("value");
      input.value = "";
    });
    row.querySelectorAll("select").forEach(function (select) {
      Array.prototype.forEach.call(select.options, function (option) { option.defaultSelected = false; });
      select.selectedIndex = 0;
    });
    row.querySelectorAll(".error").forEach(function (el) { el.textContent = ""; });
    row.querySelectorAll(".has-error").forEach(function (el) { el.classList.remove("has-error"); });
    row.querySelectorAll("[aria-invalid]").forEach(function (el) { el.removeAttribute("aria-invalid"); });
    return row;
  }

  /* Marks the server put on a form it sent back (the plain form's errors), by the server's paths,
   * to be put back beside the right rows once a kept draft has rebuilt them. */
  var serverErrors = Array.prototype.filter.call(form.querySelectorAll(".error[data-error-for]"), function (el) {
    return el.textContent.trim() !== "";
  }).map(function (el) { return { field: el.getAttribute("data-error-for"), message: el.textContent.trim() }; });

  var rowTemplates = {};
  ROW_KINDS.forEach(function (kind) {
    var first = form.querySelector('.rows[data-kind="' + kind + '"] > .row');
    if (first) { rowTemplates[kind] = blankRow(first.cloneNode(true)); }
  });

  /* ---- Photos ---- */

  function loadBitmap(file) {
    if (window.createImageBitmap) {
      return createImageBitmap(file, { imageOrientation: "from-image" }).catch(function () {
        return createImageBitmap(file);
      });
    }
    return new Promise(function (resolve, reject) {
      var image = new Image();
      image.onload = function () { resolve(image); };
      image.onerror = reject;
      image.src = URL.createObjectURL(file);
    });
  }

  function canvasToBlob(canvas, quality) {
    return new Promise(function (resolve) { canvas.toBlob(resolve, "image/jpeg", quality); });
  }

  /* A blob read by FileReader's `method` (readAsDataURL, readAsArrayBuffer). */
  function readBlob(blob, method) {
    return new Promise(function (resolve, reject) {
      var reader = new FileReader();
      reader.onload = function () { resolve(reader.result); };
      reader.onerror = reject;
      reader[method](blob);
    });
  }

  function blobToDataUrl(blob) { return readBlob(blob, "readAsDataURL"); }

  /* Scale to at most 2048 px on the long edge and re-encode as JPEG, lowering the
   * quality until the photo fits the target size. Re-encoding also drops EXIF. In the
   * shrinking worker where the browser has one (OffscreenCanvas), else on the page. */
  function compress(file) {
    return shrinkElsewhere(file).catch(function () { return shrinkHere(file); }).then(function (blob) {
      return blobToDataUrl(blob).then(function (url) { return { dataUrl: url, size: blob.size, blob: blob }; });
    });
  }

  function shrinkHere(file) {
    return loadBitmap(file).then(function (bitmap) {
      var width = bitmap.width, height = bitmap.height;
      var scale = Math.min(1, LONG_EDGE / Math.max(width, height));
      var canvas = document.createElement("canvas");
      canvas.width = Math.round(width * scale);
      canvas.height = Math.round(height * scale);
      canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
      if (bitmap.close) { bitmap.close(); }
      var qualities = [0.8, 0.68, 0.55, 0.45];
      function attempt(i) {
        return canvasToBlob(canvas, qualities[i]).then(function (blob) {
          if (blob.size > TARGET_BYTES && i + 1 < qualities.length) { return attempt(i + 1); }
          return blob;
        });
      }
      return attempt(0);
    });
  }

  /* The shrinking worker (static/capture-shrink.js), started with the first photo; a photo it
   * cannot shrink is shrunk on the page instead, and every photo once its script could not
   * load (no signal, no copy kept). */
  var shrinker = null, shrinkJobs = {}, shrinkCount = 0;

  function shrinkElsewhere(file) {
    var address = form.getAttribute("data-shrinker");
    if (shrinker === false) { return Promise.reject(new Error("no worker")); }
    if (!shrinker) {
      if (!address || !window.Worker || !window.OffscreenCanvas || !window.createImageBitmap) {
        shrinker = false;
        return Promise.reject(new Error("no worker"));
      }
      try { shrinker = new Worker(address); } catch (e) { shrinker = false; return Promise.reject(e); }
      shrinker.onmessage = function (event) {
        var job = shrinkJobs[event.data.id];
        delete shrinkJobs[event.data.id];
        if (job) { job(event.data); }
      };
      shrinker.onerror = function () {
        shrinker = false;
        Object.keys(shrinkJobs).forEach(function (id) { shrinkJobs[id]({ error: "worker" }); });
        shrinkJobs = {};
      };
    }
    shrinkCount += 1;
    var id = shrinkCount;
    return new Promise(function (resolve, reject) {
      shrinkJobs[id] = function (answer) { if (answer.blob) { resolve(answer.blob); } else { reject(new Error(answer.error)); } };
      shrinker.postMessage({ id: id, file: file, longEdge: LONG_EDGE, targetBytes: TARGET_BYTES });
    });
  }

  function renderPhotos() {
    photoList.textContent = "";
    photos.forEach(function (photo, index) {
      var item = document.createElement("li");
      var image = document.createElement("img");
      image.src = photo.data_url;
      image.alt = photo.name;
      var remove = document.createElement("button");
      remove.type = "button";
      remove.className = "remove-photo";
      remove.textContent = "×";
      remove.setAttribute("aria-label", t("Remove {name}", { name: photo.name }));
      remove.addEventListener("click", function () {
        var removed = photos.splice(index, 1)[0];
        renderPhotos();
        savePhotos();
        offerUndo(t("Photo removed."), function () {
          photos.splice(Math.min(index, photos.length), 0, removed);
          renderPhotos();
          savePhotos();
        });
      });
      item.appendChild(image);
      item.appendChild(remove);
      photoList.appendChild(item);
    });
  }

  function pad2(n) { return (n < 10 ? "0" : "") + n; }

  /* A moment as the phone's wall clock shows it, with its offset: 2026-11-20T14:05:00-08:00. */
  function localIso(when) {
    var offset = -when.getTimezoneOffset(), sign = offset >= 0 ? "+" : "-";
    offset = Math.abs(offset);
    return when.getFullYear() + "-" + pad2(when.getMonth() + 1) + "-" + pad2(when.getDate()) + "T" +
      pad2(when.getHours()) + ":" + pad2(when.getMinutes()) + ":" + pad2(when.getSeconds()) +
      sign + pad2(Math.floor(offset / 60)) + ":" + pad2(offset % 60);
  }

  function today() {
    return localIso(new Date()).slice(0, 10);
  }

  /* When and where the camera took the photo, from the JPEG's EXIF, read before compression
   * drops it: DateTimeOriginal (else CreateDate, else DateTime) and the GPS position. A file
   * without them, or not a JPEG, gives nothing and the photo keeps its file's time. */
  function readExif(file) {
    return Promise.resolve().then(function () {
      return blobBytes(file.slice(0, EXIF_BYTES));
    }).then(function (buffer) {
      var tags = exifTags(new DataView(buffer)), found = {};
      var taken = (tags.taken || []).map(exifDate).filter(Boolean)[0];
      if (taken) { found.taken_at = localIso(taken); }
      if (tags.latitude !== null && tags.longitude !== null && isFinite(tags.latitude) &&
          isFinite(tags.longitude) && !(tags.latitude === 0 && tags.longitude === 0)) {
        found.coords = { lat: Math.round(tags.latitude * 1e6) / 1e6, lng: Math.round(tags.longitude * 1e6) / 1e6 };
      }
      return found;
    }).catch(function () { return {}; });
  }

  /* A blob's bytes; FileReader where Blob.arrayBuffer is missing (Safari before 14, Chrome before 76). */
  function blobBytes(blob) {
    return blob.arrayBuffer ? blob.arrayBuffer() : readBlob(blob, "readAsArrayBuffer");
  }

  /* The APP1 "Exif" segment of a JPEG's first bytes, read as TIFF tags; {} when there is none. */
  function exifTags(view) {
    var at = 2;
    if (view.byteLength < 4 || view.getUint16(0) !== 0xFFD8) { return {}; }
    while (at + 4 <= view.byteLength) {
      var marker = view.getUint16(at), size = view.getUint16(at + 2);
      if ((marker & 0xFF00) !== 0xFF00 || marker === 0xFFDA) { return {}; }
      if (marker === 0xFFE1 && at + 10 <= view.byteLength && view.getUint32(at + 4) === 0x45786966) {
        return tiffTags(new DataView(view.buffer, at + 10, Math.min(size - 8, view.byteLength - at - 10)));
      }
      at += 2 + size;
    }
    return {};
  }

  /* The dates taken (DateTimeOriginal, CreateDate, DateTime; any may be missing or blank) and
   * the GPS latitude and longitude (degrees, south and west negative). */
  function tiffTags(tiff) {
    var little = tiff.getUint16(0) === 0x4949;
    var WIDTH = { 2: 1, 3: 2, 4: 4, 5: 8, 13: 4 };
    function directory(offset) {
      var tags = {};
      if (!offset) { return tags; }
      for (var i = 0, count = tiff.getUint16(offset, little); i < count; i += 1) {
        var entry = offset + 2 + i * 12, type = tiff.getUint16(entry + 2, little);
        var length = tiff.getUint32(entry + 4, little), bytes = (WIDTH[type] || 0) * length;
        tags[tiff.getUint16(entry, little)] = { type: type, length: length,
          at: bytes > 4 ? tiff.getUint32(entry + 8, little) : entry + 8 };
      }
      return tags;
    }
    function text(tag) {
      if (!tag || tag.type !== 2) { return null; }
      var out = "";
      for (var i = 0; i < tag.length; i += 1) {
        var code = tiff.getUint8(tag.at + i);
        if (!code) { break; }
        out += String.fromCharCode(code);
      }
      return out;
    }
    function pointer(tag) { return tag && (tag.type === 4 || tag.type === 13) ? tiff.getUint32(tag.at, little) : 0; }
    function degrees(tag, ref) {
      if (!tag || tag.type !== 5 || tag.length < 3) { return null; }
      var parts = [0, 1, 2].map(function (i) {
        return tiff.getUint32(tag.at + i * 8, little) / tiff.getUint32(tag.at + i * 8 + 4, little);
      });
      var value = parts[0] + parts[1] / 60 + parts[2] / 3600;
      return /^[SW]/.test(text(ref) || "") ? -value : value;
    }
    var main = directory(tiff.getUint32(4, little));
    var exif = directory(pointer(main[0x8769])), gps = directory(pointer(main[0x8825]));
    return { taken: [text(exif[0x9003]), text(exif[0x9004]), text(main[0x0132])],
             latitude: degrees(gps[2], gps[1]), longitude: degrees(gps[4], gps[3]) };
  }

  /* An EXIF date ("2026:11:20 14:05:00", the camera's own clock) as a local Date, or null. */
  function exifDate(value) {
    var parts = /^(\d{4})[:-](\d{2})[:-](\d{2})[ T](\d{2}):(\d{2}):(\d{2})/.exec(value || "");
    if (!parts || parts[1] === "0000") { return null; }
    var when = new Date(+parts[1], +parts[2] - 1, +parts[3], +parts[4], +parts[5], +parts[6]);
    var real = when.getMonth() === +parts[2] - 1 && when.getDate() === +parts[3] &&
      +parts[4] < 24 && +parts[5] < 60 && +parts[6] < 60;  // no 31 June, no 25:00
    return real ? when : null;
  }

  function addPhotoFiles(input) {
    var files = Array.prototype.slice.call(input.files || []);
    var room = MAX_PHOTOS - photos.length;
    var error = form.querySelector('[data-error-for="photos"]');
    error.textContent = files.length > room ? t("Only {count} photos fit on one ticket.", { count: num(MAX_PHOTOS) }) : "";
    var taking = files.slice(0, Math.max(room, 0));
    var count = photos.length + taking.length;
    // Shrunk one after another, after any still being shrunk; Send waits for all of them.
    preparing = taking.reduce(function (chain, file, index) {
      return chain.then(function () {
        preparingStep = { number: count - taking.length + index + 1, count: count };
        if (!sending) { showPreparing(); }
        return readExif(file).then(function (exif) {
          return compress(file).then(function (result) { return [exif, result]; });
        }).then(function (both) {
          var exif = both[0], result = both[1];
          var photo = { name: file.name || "photo.jpg", data_url: result.dataUrl, size: result.size,
                        taken_at: exif.taken_at || localIso(new Date(file.lastModified || Date.now())),
                        coords: exif.coords || null };
          return digestKey(result.blob, [photo.name, photo.taken_at, JSON.stringify(photo.coords)].join("|")).then(function (key) {
            if (photos.some(function (other) { return other.key === key; })) {  // the same file picked twice
              error.textContent = t("{name} is already on this ticket.", { name: photo.name });
              return;
            }
            photo.key = key;
            photos.push(photo);
            renderPhotos();
            return savePhotos().then(function () { stagePhotos(); });  // it goes up while the next is shrunk
          });
        }).catch(function () {
          error.textContent = t("Could not read {name}; try taking it again.", { name: file.name || t("a photo") });
        });
      });
    }, preparing).then(function () {
      preparingStep = null;
      input.value = "";
      if (!sending) { showQuietState(); }
      stagePhotos();
    });
  }

  function showPreparing() {
    showStatus("preparing", t("Preparing photo {number} of {count}",
                            { number: num(preparingStep.number), count: num(preparingStep.count) }));
  }

  photoInputs.forEach(function (input) {
    input.addEventListener("change", function () { addPhotoFiles(input); });
  });

  function photoKeyFor() { return "ph" + newClientRef().replace(/-/g, "").slice(0, 16); }

  /* A photo's key: the digest of its bytes and what the phone says of it ("d" and 40 hex
   * digits of SHA-256), so the office and the phone name the same photo alike on a ticket and
   * its corrections. */
  function digestKey(blob, about) {
    if (!(window.crypto && crypto.subtle && crypto.subtle.digest)) { return Promise.resolve(photoKeyFor()); }
    return blobBytes(new Blob([blob, "\n" + about])).then(function (bytes) {
      return crypto.subtle.digest("SHA-256", bytes);
    }).then(function (hash) {
      return "d" + Array.prototype.map.call(new Uint8Array(hash), function (b) {
        return ("0" + b.toString(16)).slice(-2);
      }).join("").slice(0, 40);
    }).catch(function () { return photoKeyFor(); });
  }

  /* Photos go ahead as they are taken, while the crew keeps writing and the next ones are
   * shrunk, under the send lock, each remembered once the server holds it so sending the
   * ticket skips it; photos added meanwhile follow in the same turn. The next photo leaves as
   * the last bytes of the one before should cross, not a round trip later; one that could
   * not go stops the turn. */
  function stagePhotos() {
    if (staging) { restage = true; }  // (once this turn is over: a retry is never lost)
    if (!store || staging || !draftRef || !window.CaptureSend || navigator.onLine === false) { return Promise.resolve(); }
    restage = false;
    // (a photo the office holds on the ticket being corrected is not sent again)
    function todo() {
      return photos.filter(function (photo) {
        return !photo.staged && !photo.held && photo.key && photo.refused !== draftRef && !(photo.key in onTheWay);
      });
    }
    if (!todo().length) { return Promise.resolve(); }
    staging = true;
    var ref = draftRef;
    return window.CaptureSend.withLock(function () {
      return new Promise(function (resolve) {
        var going = 0, stopped = false;
        function settle() { if (!going) { resolve(); } }
        function next() {
          var photo = todo()[0];
          if (stopped || !photo || ref !== draftRef) { settle(); return; }
          var started = false;
          function follow() { if (!started) { started = true; next(); } }
          onTheWay[photo.key] = 0;
          going += 1;
          window.CaptureSend.stagePhoto(token, ref, photo, store, function (loaded, total, acknowledged) {
            onTheWay[photo.key] = loaded;
            if (ref === draftRef) { sayProgress(overall(acknowledged)); }
          }, function (seconds) {
            if (seconds !== null) { setTimeout(follow, seconds * 1000); }
          }).catch(function () { return { state: "later" }; }).then(function (result) {
            delete onTheWay[photo.key];
            if (result.state !== "sent") {
              going -= 1;
              if (result.state === "refused" && result.status !== 404 && result.status !== 410) {
                photo.refused = ref;  // never taken: the ticket's own sending tells the crew why
                if (started) { settle(); } else { follow(); }
                return;
              }
              stopped = true;
              if (result.state === "later") { retrySoon(result); }
              settle();
              return;
            }
            photo.staged = ref;
            retries = 0;  // the signal is good again: a later drop starts from the shortest wait
            return window.CaptureSend.markHeld(store, ref, photo.key).then(function () {
              going -= 1;
              if (started) { settle(); } else { follow(); }
            });
          });
        }
        next();
      });
    }).catch(function () {}).then(function () {
      staging = false;
      return savePhotos();
    }).then(function () {
      if (restage) { stagePhotos(); }
      if (!form.hidden && !sending) { return showQuietState(); }
    });
  }

  /* A photo's bytes, from its data URL. */
  function photoBytes(photo) {
    var url = photo.data_url || "";
    return Math.floor((url.length - url.indexOf(",") - 1) * 3 / 4);
  }

  /* Where the form's photos stand while they go up, by what the office acknowledged of each:
   * a progress step over them all, as a ticket's sending tells it. */
  function overall(acknowledged) {
    var size = 0, sent = 0, held = 0;
    photos.forEach(function (photo) {
      var bytes = photoBytes(photo), done = photo.staged || photo.held ? bytes : Math.min(onTheWay[photo.key] || 0, bytes);
      size += bytes;
      sent += done;
      if (done >= bytes) { held += 1; }
    });
    return { part: "photo", held: held, of: photos.length, sent: sent, size: size, acknowledged: acknowledged,
             left: window.CaptureSend.secondsLeft(size - sent, photos.length - held),
             due: window.CaptureSend.answerDue() };
  }

  /* ---- Signature: kept as stroke data, so it is redrawn at any size. ---- */

  function drawSignatureImage() {
    if (signatureImage && signaturePad && padBox && signaturePad.toData().length === 0) {
      signaturePad.fromDataURL(signatureImage, { width: padBox.width, height: padBox.height });
    }
  }

  function signatureState() {
    if (!signaturePad) { return null; }
    var strokes = signaturePad.toData();
    if (!strokes.length && !signatureImage) { return null; }
    return { strokes: strokes, image: strokes.length ? null : signatureImage };
  }

  function restoreSignature(state) {
    signatureImage = null;
    if (!signaturePad) { return; }
    signaturePad.clear();
    if (!state) { return; }
    if (state.strokes && state.strokes.length) {
      // Drawn on another screen, perhaps: nothing may fall off this pad's edges.
      signaturePad.fromData(padBox ? window.SignatureFit.fitted(state.strokes, padBox) : state.strokes);
    } else if (state.image) {
      signatureImage = state.image;
      drawSignatureImage();
    }
  }

  function signatureIsEmpty() {
    return !signaturePad || (signaturePad.isEmpty() && !signatureImage);
  }

  function setUpSignature() {
    var canvas = document.getElementById("signature-pad");
    if (!canvas || !window.SignaturePad || !window.SignatureFit) { return; }
    signaturePad = new window.SignaturePad(canvas, { backgroundColor: "rgba(255,255,255,0)", penColor: "#000" });
    function resize() {
      var box = window.SignatureFit.resize(signaturePad, canvas);
      if (!box) { return; }  // hidden: keep what is drawn until it shows again
      padBox = box;
      drawSignatureImage();
    }
    window.addEventListener("resize", resize);
    if (window.ResizeObserver) { new ResizeObserver(resize).observe(canvas); }
    resize();
    signaturePad.addEventListener("beginStroke", function () { signatureImage = null; });
    signaturePad.addEventListener("endStroke", function () { saveDraft(); });
    document.getElementById("signature-clear").addEventListener("click", function () {
      var before = signatureState();
      if (!before) { return; }
      signaturePad.clear();
      signatureImage = null;
      saveDraft();
      offerUndo(t("Signature cleared."), function () { restoreSignature(before); });
    });
  }

  /* ---- Reading and filling the form ---- */

  function ticketFields() {
    return Array.prototype.map.call(form.querySelectorAll("[data-ticket-fields] [name]"),
                                    function (field) { return field.name; });
  }

  function value(name) {
    var field = form.elements.namedItem(name);
    return field && field.value !== undefined ? field.value.trim() : "";
  }

  function rowInputs(row) { return row.querySelectorAll("input, select"); }

  function rowsOf(kind) {
    return Array.prototype.slice.call(form.querySelectorAll('.rows[data-kind="' + kind + '"] > .row'));
  }

  function rowValues(row) {
    var entry = {}, filled = false;
    rowInputs(row).forEach(function (input) {
      var key = input.name.split(".").pop();
      var text = input.value.trim();
      /* A pick list always has a value (the hour type): it alone does not make a line. */
      if (text !== "") { entry[key] = text; filled = filled || input.tagName !== "SELECT"; }
    });
    return filled ? entry : null;
  }

  var NUMBER_KEYS = { hours: 1, workers: 1, rate: 1, quantity: 1, unitCost: 1 };

  function lineForServer(line) {
    var out = {};
    Object.keys(line).forEach(function (key) {
      out[key] = NUMBER_KEYS[key] ? line[key].replace(",", ".") : line[key];
    });
    return out;
  }

  function buildPayload() {
    var payload = {
      labor: [], equipment: [], materials: [],
      photos: photos.map(function (p) {
        return { key: p.key, name: p.name, data_url: p.data_url, taken_at: p.taken_at, coords: p.coords || null };
      }),
      client_ref: draftRef,
      language: LANG  // the crew's language: signing links for the ticket are made in it
    };
    ticketFields().forEach(function (name) { payload[name] = value(name); });
    if (!payload.worked_on) { delete payload.worked_on; }
    if (correcting) { payload.revises = correcting; }
    ROW_KINDS.forEach(function (kind) {
      payload[kind] = rowsOf(kind).map(rowValues).filter(function (row) { return row !== null; }).map(lineForServer);
    });
    if (!signatureIsEmpty()) {
      payload.signature = { name: value("signature.name") || null, role: value("signature.role") || null,
                            qualifier: value("signature.qualifier") || null,
                            qualifier_reason: value("signature.qualifier_reason") || null,
                            signed_at: new Date().toISOString(),
                            image: signaturePad.isEmpty() ? signatureImage : signaturePad.toDataURL("image/png") };
    }
    return payload;
  }

  function setField(name, text) {
    var field = form.elements.namedItem(name);
    if (field && text !== undefined && text !== null) { field.value = String(text); }
  }

  /* Rows are cloned from the page's own first row, so this needs no network. */
  function fillRows(kind, lines) {
    var box = form.querySelector('.rows[data-kind="' + kind + '"]');
    if (!box || !rowTemplates[kind]) { return; }
    box.textContent = "";
    var list = lines && lines.length ? lines : [{}];
    list.forEach(function (line, index) {
      var row = index === 0 ? rowTemplates[kind].cloneNode(true) : cloneRow(rowTemplates[kind]);
      rowInputs(row).forEach(function (input) {
        var key = input.name.split(".").pop();
        var text = !line || line[key] === undefined || line[key] === null ? "" : String(line[key]);
        if (input.tagName === "SELECT" && text === "") { input.selectedIndex = 0; } else { input.value = text; }
      });
      box.appendChild(row);
    });
  }

  function fillForm(payload, signature) {
    form.reset();
    clearErrors();
    ticketFields().forEach(function (name) { setField(name, payload[name]); });
    ROW_KINDS.forEach(function (kind) { fillRows(kind, payload[kind]); });
    // Each photo keeps its key: what the office holds under it is not sent again.
    photos = (payload.photos || []).map(function (p) {
      return { key: p.key || photoKeyFor(), name: p.name, data_url: p.data_url, taken_at: p.taken_at,
               coords: p.coords || null, size: 0 };
    });
    photosRef = draftRef;
    renderPhotos();
    if (payload.signature) {
      setField("signature.name", payload.signature.name);
      setField("signature.role", payload.signature.role);
      setField("signature.qualifier", payload.signature.qualifier);
      setField("signature.qualifier_reason", payload.signature.qualifier_reason);
    }
    restoreSignature(signature || (payload.signature && payload.signature.image
      ? { strokes: [], image: payload.signature.image } : null));
  }

  function formIsEmpty() {
    return !value("description") && !value("reason") && !value("directed_by") && photos.length === 0 &&
      signatureIsEmpty() && ROW_KINDS.every(function (kind) { return rowsOf(kind).every(function (row) { return !rowValues(row); }); });
  }

  /* ---- The draft: saved as the crew types, restored after a reload, a crash or the camera. ---- */

  function draftSnapshot() {
    var values = {};
    ticketFields().concat(["signature.name", "signature.role", "signature.qualifier",
                           "signature.qualifier_reason"]).forEach(function (name) { values[name] = value(name); });
    var rows = {};
    ROW_KINDS.forEach(function (kind) {
      rows[kind] = rowsOf(kind).map(function (row) { return rowValues(row) || {}; });
    });
    return { values: values, rows: rows, signature: signatureState(), restored_key: restoredKey,
             client_ref: draftRef, correcting: correcting, correcting_reference: correctingReference,
             saved_at: new Date().toISOString() };
  }

  function saveDraftNow() {
    draftTimer = null;
    if (!store || !draftReady || form.hidden) { return Promise.resolve(); }
    return store.set(DRAFT_KEY, draftSnapshot()).catch(function () {});
  }

  function saveDraft() {
    if (draftTimer) { clearTimeout(draftTimer); }
    draftTimer = setTimeout(saveDraftNow, 250);
  }

  /* The form's photos, kept with the reference of the ticket they belong to; once that ticket
   * is kept to send, nothing writes them back for the next one. */
  function savePhotos() {
    if (!store || !draftReady || photosRef !== draftRef) { return Promise.resolve(); }
    return store.set(DRAFT_PHOTOS_KEY, { client_ref: draftRef, photos: photos.slice() }).catch(function () {});
  }

  function clearDraft() {
    if (draftTimer) { clearTimeout(draftTimer); draftTimer = null; }
    if (!store) { return Promise.resolve(); }
    return Promise.all([store.del(DRAFT_KEY), store.del(DRAFT_PHOTOS_KEY)]).catch(function () {});
  }

  /* The draft and its photos, unless their ticket was kept to send or sent already (the page
   * went away between keeping it and emptying the form): then the form starts empty. Photos
   * are taken back only with the ticket they were taken for. */
  function restoreDraft() {
    if (!store) { draftReady = true; photosRef = draftRef; return Promise.resolve(false); }
    return Promise.all([store.get(DRAFT_KEY), store.get(DRAFT_PHOTOS_KEY), store.keys()]).then(function (found) {
      var draft = found[0], kept = found[1], keys = found[2].map(String);
      function gone(ref) { return !!ref && (keys.indexOf(QUEUE_PREFIX + ref) >= 0 || keys.indexOf(SENT_PREFIX + ref) >= 0); }
      if (draft && gone(draft.client_ref)) { draft = null; }
      var keptRef = kept && !Array.isArray(kept) ? kept.client_ref : null;
      var ours = Array.isArray(kept) ? !!draft  // kept before photos named their ticket
        : !!keptRef && !gone(keptRef) && (!draft || !draft.client_ref || draft.client_ref === keptRef);
      kept = !ours ? [] : Array.isArray(kept) ? kept.filter(function (photo) { return !gone(photo.staged); }) : kept.photos || [];
      if (!draft && !kept.length) { return clearDraft().then(function () { return false; }); }
      if (draft && draft.client_ref) { draftRef = draft.client_ref; } else if (keptRef && ours) { draftRef = keptRef; }
      draft = draft || { values: {}, rows: {} };
      Object.keys(draft.values || {}).forEach(function (name) { setField(name, draft.values[name]); });
      ROW_KINDS.forEach(function (kind) { if (draft.rows && draft.rows[kind]) { fillRows(kind, draft.rows[kind]); } });
      if (serverErrors.length) { showErrors({ details: serverErrors }); }
      photos = kept || [];
      renderPhotos();
      restoreSignature(draft.signature);
      restoredKey = draft.restored_key || null;
      correcting = draft.correcting || null;  // a correction stays one after a reload or the camera
      correctingReference = draft.correcting_reference || null;
      photos.forEach(function (photo, index) { if (!photo.key) { photo.key = "p" + (index + 1); } });
      return true;
    }).catch(function () { return false; }).then(function (restored) {
      photosRef = draftRef;
      draftReady = true;
      return restored;
    });
  }

  form.addEventListener("input", function (event) {
    if (event.target.type !== "file") { saveDraft(); }
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") { saveDraftNow(); }
  });
  window.addEventListener("pagehide", function () { saveDraftNow(); });

  /* ---- Checking on the phone, with the server's own rules (its JSON Schema) ---- */

  function resolveNode(node) {
    if (node && node.$ref && schema && schema.$defs) { return schema.$defs[node.$ref.split("/").pop()]; }
    if (node && node.anyOf) {
      var real = node.anyOf.filter(function (n) { return n.type !== "null"; })[0];
      return resolveNode(real);
    }
    return node;
  }

  var NUMBER_TEXT = /^\s*-?(\d+([.,]\d*)?|[.,]\d+)\s*$/;

  function checkValue(node, text, required) {
    node = resolveNode(node) || {};
    var blank = text === undefined || text === null || String(text).trim() === "";
    if (blank) { return required ? t("Please fill this in.") : null; }
    text = String(text).trim();
    if (node.type === "number" || node.type === "integer") {
      if (!NUMBER_TEXT.test(text)) { return t("Write a number, like 2 or 1.5."); }
      var number = parseFloat(text.replace(",", "."));
      if (node.minimum !== undefined && number < node.minimum) { return t("Must be {number} or more.", { number: num(node.minimum) }); }
      if (node.maximum !== undefined && number > node.maximum) { return t("Must be {number} or less.", { number: num(node.maximum) }); }
      return null;
    }
    if (node.maxLength !== undefined && text.length > node.maxLength) {
      return t("Too long: at most {count} letters.", { count: num(node.maxLength) });
    }
    if (node.minLength !== undefined && text.length < node.minLength) { return t("Please fill this in."); }
    return null;
  }

  /* Problems with the ticket on screen: [{element, message}] for the boxes beside fields. */
  function checkForm() {
    var problems = [];
    if (!schema) { return problems; }
    var required = schema.required || [];
    ticketFields().forEach(function (name) {
      var node = schema.properties[name];
      if (!node) { return; }
      var message = checkValue(node, value(name), required.indexOf(name) >= 0);
      if (message) { problems.push({ box: form.querySelector('[data-error-for="' + name + '"]'), message: message }); }
    });
    ROW_KINDS.forEach(function (kind) {
      var listNode = schema.properties[kind] || {};
      var itemNode = resolveNode(listNode.items) || { properties: {} };
      var filled = rowsOf(kind).filter(function (row) { return rowValues(row) !== null; });
      if (listNode.maxItems !== undefined && filled.length > listNode.maxItems) {
        problems.push({ box: null, message: t("At most {count} lines of this kind fit on one ticket.", { count: num(listNode.maxItems) }) });
      }
      filled.forEach(function (row) {
        var line = rowValues(row);
        rowInputs(row).forEach(function (input) {
          var key = input.name.split(".").pop();
          var node = itemNode.properties[key];
          if (!node) { return; }
          var message = checkValue(node, line[key], (itemNode.required || []).indexOf(key) >= 0);
          if (message) { problems.push({ box: row.querySelector('[data-error-for$="].' + key + '"]'), message: message }); }
        });
      });
    });
    var signatureNode = resolveNode(schema.properties.signature);
    if (signatureNode && signatureNode.properties && !signatureIsEmpty()) {
      ["name", "role"].forEach(function (key) {
        var message = checkValue(signatureNode.properties[key], value("signature." + key), false);
        if (message) { problems.push({ box: form.querySelector('[data-error-for="signature.' + key + '"]'), message: message }); }
      });
      if (value("signature.qualifier") === "not_verified" && !value("signature.qualifier_reason")) {
        problems.push({ box: form.querySelector('[data-error-for="signature.qualifier_reason"]'),
                        message: t("Please say why it is not verified.") });
      }
    }
    return problems;
  }

  /* The server's words turned into a crew's words. */
  function plainMessage(message) {
    var text = String(message || "");
    var match;
    if (/at least 1 character|Field required|more than whitespace|must not be blank/i.test(text)) { return t("Please fill this in."); }
    if ((match = /less than or equal to ([\d.]+)/i.exec(text))) { return t("Must be {number} or less.", { number: num(parseFloat(match[1])) }); }
    if ((match = /greater than or equal to ([\d.]+)/i.exec(text))) { return t("Must be {number} or more.", { number: num(parseFloat(match[1])) }); }
    if ((match = /at most (\d+) characters/i.exec(text))) { return t("Too long: at most {count} letters.", { count: num(parseInt(match[1], 10)) }); }
    if (/valid number|must be a number|finite number/i.test(text)) { return t("Write a number, like 2 or 1.5."); }
    if (/not a JPEG|image/i.test(text)) { return t("This photo could not be read; take it again."); }
    return text;
  }

  function clearErrors() {
    form.querySelectorAll(".error").forEach(function (el) {
      if (el.getAttribute("data-error-for") !== "photos") { el.textContent = ""; }
    });
    form.querySelectorAll(".has-error").forEach(function (el) { el.classList.remove("has-error"); });
    form.querySelectorAll("[aria-invalid]").forEach(function (el) { el.removeAttribute("aria-invalid"); });
    var top = form.querySelector(".js-form-error");
    top.hidden = true;
  }

  /* Server paths count only the rows that were sent; map them back to rows on screen. */
  function fieldForPath(path) {
    var match = /^(labor|equipment|materials)\[(\d+)\]\.(\w+)$/.exec(path);
    if (!match) { return form.querySelector('[data-error-for="' + path + '"]'); }
    var sentIndex = parseInt(match[2], 10), seen = -1, target = null;
    rowsOf(match[1]).forEach(function (row) {
      var filled = rowValues(row) !== null;
      if (filled) { seen += 1; }
      if (filled && seen === sentIndex && !target) {
        target = row.querySelector('[data-error-for$="].' + match[3] + '"]');
      }
    });
    return target;
  }

  function markProblems(problems) {
    clearErrors();
    var top = form.querySelector(".js-form-error");
    top.textContent = t("Please fix the marked fields.");
    top.hidden = false;
    problems.forEach(function (problem) {
      var box = problem.box || top;
      box.textContent = box === top ? top.textContent + " " + problem.message : problem.message;
      var label = box.closest ? box.closest(".field") : null;
      if (label) {
        label.classList.add("has-error");
        var input = label.querySelector("input, textarea");
        if (input) { input.setAttribute("aria-invalid", "true"); }
      }
    });
    var first = form.querySelector(".has-error input, .has-error textarea");
    if (first) { first.focus(); }
  }

  function showErrors(error) {
    markProblems((error.details || []).map(function (detail) {
      var path = detail.field.replace(/\.data_url$/, "").replace(/^photos\[\d+\]$/, "photos");
      return { box: fieldForPath(detail.field) || fieldForPath(path), message: plainMessage(detail.message) };
    }));
  }

  /* ---- Sending ---- */

  /* Words for the tray while a ticket goes out part by part, from this page or the service
   * worker: how much of a photo the server has acknowledged, never what merely left the phone. */
  function sayProgress(step) {
    if (step.part === "text") { showStatus("sending", t("Sending the ticket…")); return; }
    if (step.part === "signature") { showStatus("sending", t("Sending the signature…")); return; }
    if (!step.acknowledged) { return; }  // where an earlier try stopped is no sign of signal
    var share = step.size ? Math.floor(100 * (step.sent || 0) / step.size) / 100 : 0;
    var words = t("{held} of {count} photos, {share}", {
      held: num(step.held), count: num(step.of),
      share: new Intl.NumberFormat(LANG, { style: "percent" }).format(share) });
    var left = step.left;
    if (typeof left === "number" && step.sent < step.size) {  // (whole minutes, rounded up)
      var minutes = Math.max(1, Math.ceil(left / 60));
      words += ", " + tn("{minutes} min left", "{minutes} min left", minutes, { minutes: num(minutes) });
    }
    showStatus("sending", words, step.due ? 1000 * step.due : 0);
    if (!progress.hidden && step.size) { progress.value = Math.floor(100 * (step.sent || 0) / step.size); }
  }

  /* Why a ticket still waits, when the office said why. */
  function waitingWhy(status) {
    return status === 507 ? t("The office is out of space.") + " " : "";
  }

  /* With the page open, a try the signal cut is tried again within seconds (each second for the
   * first three, as most cuts are short, then 2, 4, then every 8 s), not when the browser next
   * wakes the service worker; "online" tries at once. One the office turned away for now (busy,
   * out of space) waits a minute. */
  var RETRY_MS = [1000, 1000, 1000, 2000, 4000, 8000];
  var OFFICE_RETRY_MS = 60000;
  var retries = 0;
  var retryTimer = null;
  var retryAt = 0;

  function retrySoon(outcome) {
    if (retryTimer) { return; }
    var wait = window.CaptureSend.waitsOnOffice(outcome) ? OFFICE_RETRY_MS
      : RETRY_MS[Math.min(retries, RETRY_MS.length - 1)];
    retries += 1;
    retryAt = Date.now() + wait;
    retryTimer = setTimeout(function () {
      retryTimer = null;
      flushQueue();
      stagePhotos();
    }, wait);
  }

  function retryNow() {
    if (retryTimer) { clearTimeout(retryTimer); retryTimer = null; }
    retries = 0;
    flushQueue();
    stagePhotos();
  }

  function send(entry) {
    return window.CaptureSend.send(entry, store, { progress: sayProgress });
  }

  /* One sender at a time on this phone: the page and the service worker share a lock. */
  function withSendLock(work) { return window.CaptureSend.withLock(work); }

  function remember(entry) {
    if (!store) { return Promise.reject(new Error("no storage")); }
    return store.set(QUEUE_PREFIX + entry.payload.client_ref, entry);
  }

  function forget(entry) {
    if (!store) { return Promise.resolve(); }
    return Promise.all([store.del(QUEUE_PREFIX + entry.payload.client_ref).catch(function () {}),
                        window.CaptureSend.forget(store, entry.payload.client_ref)]);
  }

  function recordSent(entry, outcome) {
    if (!store) { return Promise.resolve(); }
    return window.CaptureSend.recordSent(store, entry, outcome.body, outcome.photosRefused, projectName,
                                         outcome.refusals);
  }

  /* What the office made of this phone's sent tickets (asked by the client references only this
     phone holds); one sent back can be corrected and sent again as the same ticket. */
  function showMine() {
    var section = document.getElementById("my-tickets");
    if (!store || !section) { return Promise.resolve(); }
    var here = form.getAttribute("data-submit-url").split("?")[0];
    return store.entries().then(function (pairs) {
      var byRef = {};
      pairs.forEach(function (pair) {
        var record = pair[1];
        if (String(pair[0]).indexOf(SENT_PREFIX) === 0 && record && record.client_ref &&
            record.url && record.url.split("?")[0] === here) { byRef[record.client_ref] = record; }
      });
      if (!Object.keys(byRef).length) { section.hidden = true; return; }
      return fetch(section.getAttribute("data-mine-url"), {
        method: "POST", headers: { "Content-Type": "application/json", "Accept": "application/json" },
        body: JSON.stringify({ client_refs: Object.keys(byRef) })
      }).then(function (response) { return response.ok ? response.json() : { data: [] }; })
        .then(function (answer) {
          markSentBack(answer.data || [], byRef);
          var list = document.getElementById("my-tickets-list");
          var askBox = document.getElementById("sign-request-form");
          if (askBox && list.contains(askBox)) { askBox.hidden = true; section.appendChild(askBox); }
          list.textContent = "";
          (answer.data || []).forEach(function (ticket) {
            var item = document.createElement("li");
            item.className = "mine " + ticket.status;
            item.setAttribute("data-reference", ticket.reference);
            var title = document.createElement("strong");
            title.textContent = ticket.reference;
            var text = document.createElement("span");
            text.textContent = " " + ticket.description + " ";
            var state = document.createElement("span");
            state.className = "state";
            state.textContent = ticket.state;
            item.appendChild(title);
            item.appendChild(text);
            item.appendChild(state);
            var record = byRef[ticket.client_ref];
            if (ticket.signed) {
              var signedNote = document.createElement("span");
              signedNote.className = "state";
              signedNote.textContent = t("Signed.");
              item.appendChild(signedNote);
            } else if (ticket.can_request_signature) {
              var ask = document.createElement("button");
              ask.type = "button";
              ask.className = "secondary ask-signature";
              ask.textContent = ticket.awaiting_signature ? t("Send the signing link again")
                : t("Send it to be signed");
              ask.addEventListener("click", function () { openSignRequest(item, ticket.client_ref); });
              item.appendChild(ask);
            }
            if (ticket.status === "rejected" && record && record.payload) {
              var button = document.createElement("button");
              button.type = "button";
              button.className = "secondary";
              button.textContent = t("Correct and send again");
              button.addEventListener("click", function () { correct(ticket, record); });
              item.appendChild(button);
            }
            list.appendChild(item);
          });
          section.hidden = !(answer.data || []).length;
        });
    }).catch(function () {});
  }

  /* The tray's record of each sent ticket follows what the office did: one sent back says so,
   * with the reason, never a green "Sent". */
  function markSentBack(found, byRef) {
    var changed = found.filter(function (ticket) {
      var record = byRef[ticket.client_ref];
      if (!record) { return false; }
      var state = ticket.status === "rejected" ? "sent-back" : "sent";
      if ((record.state || "sent") === state && (record.reason || null) === (ticket.reason || null)) { return false; }
      record.state = state;
      record.reason = ticket.reason || null;
      return true;
    }).map(function (ticket) {
      var record = byRef[ticket.client_ref];
      return store.set(SENT_PREFIX + ticket.client_ref, record).catch(function () {});
    });
    if (!changed.length) { return; }
    Promise.all(changed).then(function () {
      var quiet = /(^| )(sent|refused|idle)( |$)/.test(statusBox.className) && !sending;
      return quiet ? showQuietState() : refreshTray();
    });
  }

  /* "The super isn't here": a signing link for one of this phone's tickets, e-mailed or texted. */
  function openSignRequest(item, clientRef) {
    var box = document.getElementById("sign-request-form");
    if (!box) { return; }
    item.appendChild(box);
    box.setAttribute("data-client-ref", clientRef);
    box.hidden = false;
    document.getElementById("sign-request-result").hidden = true;
    document.getElementById("sign-request-error").textContent = "";
    box.elements.namedItem("name").focus();
  }

  function setUpSignRequest() {
    var box = document.getElementById("sign-request-form");
    if (!box) { return; }
    box.addEventListener("submit", function (event) {
      event.preventDefault();
      var field = function (name) { return box.elements.namedItem(name).value.trim(); };
      var error = document.getElementById("sign-request-error");
      error.textContent = "";
      if (!field("name") || (!field("phone") && !field("email"))) {
        error.textContent = t("Give the signer's name and a phone number or an e-mail.");
        return;
      }
      fetch(box.getAttribute("data-url"), {
        method: "POST", headers: { "Content-Type": "application/json", "Accept": "application/json" },
        body: JSON.stringify({ client_ref: box.getAttribute("data-client-ref"), name: field("name"),
                               role: field("role") || null, phone: field("phone") || null,
                               email: field("email") || null, language: LANG === "es" ? "es" : "en" })
      }).then(function (response) {
        return response.json().then(function (body) { return { ok: response.ok, body: body }; });
      }).then(function (answer) {
        if (!answer.ok) {
          var code = answer.body && answer.body.error && answer.body.error.code;
          error.textContent = code === "validation_failed"
            ? t("Check the phone number and the e-mail.")
            : code === "ticket_already_signed" ? t("Signed.")
            : code === "ticket_written" ? t("This ticket was already sent on, so it can no longer be signed.")
            : code === "too_many_signature_requests"
              ? t("This ticket already has signing links waiting. Send one you made, or ask the project manager.")
            : code === "rate_limited" ? t("Too many signing links were made from this poster. Try again in an hour.")
            : t("The link could not be made. Try again.");
          return;
        }
        var result = document.getElementById("sign-request-result");
        document.getElementById("sign-request-said").textContent = answer.body.emailed
          ? t("Sent by e-mail to {email}. You can also text it:", { email: answer.body.email })
          : t("Send this link to the signer:");
        document.getElementById("sign-request-url").value = answer.body.url;
        var sms = document.getElementById("sign-request-sms");
        sms.href = answer.body.sms_href;
        result.hidden = false;
      }).catch(function () {
        error.textContent = t("No signal. Try again when there is signal.");
      });
    });
    /* Not a submit button: the ticket form's Send stays the page's only one. */
    document.getElementById("sign-request-send").addEventListener("click", function () { box.requestSubmit(); });
    document.getElementById("sign-request-copy").addEventListener("click", function () {
      var input = document.getElementById("sign-request-url");
      input.select();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(input.value).catch(function () {});
      } else {
        try { document.execCommand("copy"); } catch (e) { /* the link stays selected to copy by hand */ }
      }
    });
  }

  /* A sent-back ticket back in the form; the photos the office holds on it (by the keys, the
   * digests, it reports) stay there and are not sent again. */
  function correct(ticket, record) {
    fillForm(record.payload);
    var held = ticket.photo_keys || [];
    photos.forEach(function (photo) { photo.held = held.indexOf(photo.key) >= 0; });
    correcting = record.client_ref;
    correctingReference = ticket.reference;
    form.hidden = false;
    document.getElementById("done").hidden = true;
    showCorrecting();
    form.scrollIntoView();
    saveDraftNow();
    savePhotos().then(stagePhotos);  // its photos go ahead while the crew corrects it
  }

  function showCorrecting() {
    showStatus("saved", t("Correcting {reference}: change what is needed and send it again. It stays the same ticket.",
                          { reference: correctingReference }));
  }

  function askForBackgroundSync() {
    if (navigator.serviceWorker && navigator.serviceWorker.ready) {
      navigator.serviceWorker.ready.then(function (registration) {
        if (registration.sync) { return registration.sync.register("send-tickets"); }
      }).catch(function () {});
    }
  }

  /* A refused ticket is kept on the phone until the crew sends it again from a form. */
  function keepRefused(entry, outcome) {
    if (!store) { return Promise.resolve(null); }
    var key = REFUSED_PREFIX + entry.payload.client_ref;
    var kept = { url: entry.url, payload: entry.payload, saved_at: entry.saved_at, status: outcome.status,
                 error: (outcome.body && outcome.body.error) || null, signature: entry.signature || null,
                 project_id: entry.project_id || null, project_name: entry.project_name || null };
    return store.set(key, kept).then(function () { return forget(entry); })
      .then(function () { return key; }).catch(function () { return null; });
  }

  function linkGone(entry) { return entry.status === 404 || entry.status === 410; }

  function showSent(reference, photosRefused, refusals) {
    var words = t("Sent {reference} {time}", { reference: reference, time: clock() });
    if (photosRefused) { words += ". " + photosRefusedWords(photosRefused, refusals); }
    showStatus("sent", words);
    retries = 0;
    var kept = document.getElementById("kept");
    if (!kept.hidden) {  // "kept on this phone" is no longer true: it is sent
      kept.hidden = true;
      document.getElementById("done-reference").textContent = reference;
      document.getElementById("done").hidden = false;
    }
    refreshTray();
  }

  function restore(key, entry) {
    restoredKey = key;
    correcting = entry.payload.revises || null;
    form.hidden = false;
    document.getElementById("kept").hidden = true;
    document.getElementById("done").hidden = true;
    fillForm(entry.payload, entry.signature);
    var gone = linkGone(entry);
    if (!gone && entry.error) { showErrors(entry.error); }
    var elsewhere = entry.project_id && entry.project_id !== projectId;
    if (elsewhere) {
      projectNotice.textContent = t("This ticket was written for {old}. It will be filed under {new} when you press Send.",
                                    { old: entry.project_name, "new": projectName });
      projectNotice.hidden = false;
    }
    showStatus("refused", gone ? t("This link was closed by the office")
      : t("Sent back: some fields need fixing. Fix the marked fields and send it again."));
    saveDraftNow();
  }

  function offerRefused() {
    if (!store || restoredKey) { return Promise.resolve(); }
    return store.keys().then(function (keys) {
      var refused = keys.filter(function (key) { return String(key).indexOf(REFUSED_PREFIX) === 0; });
      if (!refused.length) { return; }
      return store.get(refused[0]).then(function (entry) {
        if (!entry) { return; }
        var here = !linkGone(entry) && entry.url === form.getAttribute("data-submit-url");
        if (here && formIsEmpty()) { restore(refused[0], entry); return; }
        showStatus("refused", linkGone(entry) ? refusedReason(entry) : entry.project_name
          ? t("Sent back: a ticket for {project} could not be sent because {reason}. It is kept on this phone.",
              { project: entry.project_name, reason: refusedReason(entry) })
          : t("Sent back: a ticket could not be sent because {reason}. It is kept on this phone.",
              { reason: refusedReason(entry) }));
        if (!formIsEmpty()) { return; }
        var sameProject = !entry.project_id || entry.project_id === projectId;
        trayButton(sameProject ? t("Open it in this form") : t("Send it under {project} instead", { project: projectName }),
                   function () { restore(refused[0], entry); });
      });
    }).catch(function () {});
  }

  function flushQueue() {
    if (!store || sending) { return Promise.resolve(); }
    sending = true;
    return withSendLock(function () {
      return store.keys().then(function (keys) {
        var mine = keys.filter(function (key) { return String(key).indexOf(QUEUE_PREFIX) === 0; });
        return mine.reduce(function (chain, key, index) {
          return chain.then(function () {
            return store.get(key).then(function (entry) {
              if (!entry) { return; }
              return send(entry).then(function (outcome) {
                if (outcome.state === "sent") {
                  return forget(entry).then(function () { return recordSent(entry, outcome); })
                    .then(function () { showSent(outcome.body.reference, outcome.photosRefused, outcome.refusals); });
                }
                if (outcome.state === "refused") {
                  return keepRefused(entry, outcome).then(function () {
                    showStatus("refused", linkGone(outcome) ? refusedReason(outcome)
                      : t("Sent back: {reason}", { reason: refusedReason(outcome) }) + ".");
                  });
                }
                retrySoon(outcome);
                return showLater(outcome);
              });
            });
          });
        }, Promise.resolve());
      });
    }).catch(function () {}).then(function () { sending = false; })
      .then(refreshTray).then(offerRefused);
  }

  /* The tray once a try did not get everything through: why, and that it keeps trying. */
  function showLater(outcome) {
    return showWaiting(waitingWhy(outcome.status));
  }

  function dropRestored() {
    var key = restoredKey;
    restoredKey = null;
    return key && store ? store.del(key).catch(function () {}) : Promise.resolve();
  }

  function rememberMe(payload) {
    try {
      localStorage.setItem(ME_KEY, JSON.stringify({ captured_by: value("captured_by"),
                                                    labor: payload.labor || [] }));
    } catch (e) { /* private mode: nothing to remember */ }
  }

  function lastLabor() {
    try {
      var me = JSON.parse(localStorage.getItem(ME_KEY) || "null");
      return me && me.labor && me.labor.length ? me.labor : null;
    } catch (e) { return null; }
  }

  var sameAsLast = document.getElementById("same-as-last");
  if (sameAsLast) {
    sameAsLast.addEventListener("click", function () {
      var lines = lastLabor();
      if (!lines) { return; }
      var box = form.querySelector('.rows[data-kind="labor"]');
      var before = Array.prototype.slice.call(box.children);
      fillRows("labor", lines);
      saveDraft();
      offerUndo(t("Labor lines copied from your last ticket."), function () {
        box.textContent = "";
        before.forEach(function (row) { box.appendChild(row); });
      });
    });
  }

  /* The signer is usually who told the crew to do the work: fill it in until the crew changes it. */
  var signerName = form.elements.namedItem("signature.name");
  var directedBy = form.elements.namedItem("directed_by");
  var signerFollows = true;
  if (signerName && directedBy) {
    directedBy.addEventListener("input", function () {
      if (signerFollows) { signerName.value = directedBy.value; }
    });
    signerName.addEventListener("input", function () {
      signerFollows = signerName.value === "" || signerName.value === directedBy.value;
    });
  }

  function recallMe() {
    if (!value("worked_on")) { setField("worked_on", today()); }
    if (sameAsLast) { sameAsLast.hidden = !lastLabor(); }
    signerFollows = !value("signature.name") || value("signature.name") === value("directed_by");
    try {
      var me = JSON.parse(localStorage.getItem(ME_KEY) || "null");
      if (me && me.captured_by && !value("captured_by")) { setField("captured_by", me.captured_by); }
    } catch (e) { /* nothing remembered */ }
  }

  function emptyForm() {
    form.reset();
    ROW_KINDS.forEach(function (kind) { fillRows(kind, []); });
    photos = [];
    photosRef = draftRef;
    renderPhotos();
    restoreSignature(null);
    projectNotice.hidden = true;
    recallMe();
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var button = form.querySelector("button[type=submit]");
    if (button.disabled) { return; }
    button.disabled = true;
    // A photo still being shrunk was taken for this ticket: it goes with it.
    preparing.then(function () { button.disabled = false; sendForm(); });
  });

  function sendForm() {
    clearErrors();
    var problems = checkForm();
    if (problems.length) {
      markProblems(problems);
      showStatus("problem", t("Not sent yet: fix the marked fields first."));
      return;
    }
    var entry = { url: form.getAttribute("data-submit-url"), payload: buildPayload(), saved_at: new Date().toISOString(),
                  signature: signatureState(), project_id: projectId, project_name: projectName, token: token };
    var button = form.querySelector("button[type=submit]");
    var ticketPhotos = photos;
    button.disabled = true;
    rememberMe(entry.payload);
    remember(entry).then(function () {
      // Safe on the phone from here on: only now may the form be emptied (the entry itself
      // says which ticket it corrects; the next one corrects none). Its photos are the
      // entry's now: the next ticket starts with none, whatever is still going up.
      draftRef = newClientRef();
      photos = [];
      photosRef = draftRef;
      correcting = correctingReference = null;
      return dropRestored().then(clearDraft).then(function () { return true; });
    }, function () { return false; }).then(function (kept) {
      if (!kept) {
        button.disabled = false;
        showStatus("problem", t("This phone could not keep the ticket. Keep this page open and press Send again."));
        return;
      }
      progress.hidden = false;
      progress.value = 0;
      showStatus("sending", t("Sending the ticket…"));
      sending = true;
      return withSendLock(function () {
        return store.get(QUEUE_PREFIX + entry.payload.client_ref).then(function (still) {
          if (!still) { return { state: "gone-already" }; }  // the service worker sent it meanwhile
          return send(entry);
        });
      }).then(function (outcome) {
        sending = false;
        button.disabled = false;
        progress.hidden = true;
        if (outcome.state === "sent") {
          return forget(entry).then(function () { return recordSent(entry, outcome); }).then(function () {
            correcting = null;
            showMine();
            form.hidden = true;
            emptyForm();
            document.getElementById("done-reference").textContent = outcome.body.reference;
            document.getElementById("done").hidden = false;
            showSent(outcome.body.reference, outcome.photosRefused, outcome.refusals);
            window.scrollTo(0, 0);
          });
        }
        if (outcome.state === "gone-already") { form.hidden = true; emptyForm(); return showQuietState(); }
        if (outcome.state === "refused") {
          // Kept on the phone too, so closing the tab loses nothing.
          return keepRefused(entry, outcome).then(function (key) {
            // Still this form's ticket, under its own reference: its photos come back to it.
            restoredKey = key;
            draftRef = entry.payload.client_ref;
            photos = ticketPhotos;
            photosRef = draftRef;
            correcting = entry.payload.revises || null;
            savePhotos();
            saveDraftNow();
            showErrors((outcome.body && outcome.body.error) || { details: [] });
            showStatus("refused", linkGone(outcome) ? t("This link was closed by the office")
              : t("Sent back: some fields need fixing. Fix the marked fields and send it again."));
            refreshTray();
          });
        }
        form.hidden = true;
        emptyForm();
        // Why it is kept: no signal only when the phone says so; else nothing answered.
        var kept = document.getElementById("kept");
        kept.querySelector("[data-kept-offline]").hidden = navigator.onLine;
        kept.querySelector("[data-kept-online]").hidden = !navigator.onLine;
        kept.hidden = false;
        window.scrollTo(0, 0);
        askForBackgroundSync();
        retrySoon(outcome);
        return showLater(outcome).then(refreshTray);
      });
    });
  }

  document.querySelectorAll("[data-record-another]").forEach(function (link) {
    link.addEventListener("click", function (event) {
      event.preventDefault();
      emptyForm();
      form.hidden = false;
      document.getElementById("done").hidden = true;
      document.getElementById("kept").hidden = true;
      window.scrollTo(0, 0);
    });
  });

  /* On a first visit, ask the worker to keep this page and its assets for use offline. */
  function keepThisPage(registration) {
    if (navigator.serviceWorker.controller || !registration.active) { return; }
    registration.active.postMessage({ type: "keep-page", page: location.href });
  }

  if (navigator.serviceWorker && window.isSecureContext) {
    navigator.serviceWorker.register("/c/sw.js", { scope: "/c/" }).catch(function () {});
    navigator.serviceWorker.ready.then(keepThisPage).catch(function () {});
    navigator.serviceWorker.addEventListener("message", function (event) {
      var data = event.data || {};
      if (data.type === "sent") { showSent(data.reference, data.photos_refused, data.refusals); }
      // The worker sends what waits in the background: the tray follows it, not "No signal".
      if (data.type === "sending") {
        // With no signal the worker's try goes nowhere: the tray keeps "Waiting for signal".
        if (navigator.onLine === false) { showStatus("saved", t("Waiting for signal")); }
        else { showStatus("sending", t("Sending the ticket…")); }
      }
      if (data.type === "progress" && data.step) { sayProgress(data.step); }
      if (data.type === "waiting" && !sending) { retrySoon(data); showLater(data); }
    });
  }
  // Signal is back: send at once (the tray says "Sending" as soon as the office answers).
  window.addEventListener("online", function () {
    retryNow();
    if (!sending && !preparingStep) { showQuietState(); }
  });
  // Signal is gone: the tray says so at once, never "Sending" into nothing.
  window.addEventListener("offline", function () {
    if (/(^| )(sending|saved|waiting-answer)( |$)/.test(statusBox.className) && !preparingStep) {
      showStatus("saved", t("Waiting for signal"));
    }
  });
  // The language this page is in: with no signal, the next page opens in it too.
  if (store) { store.set("capture-language", LANG).catch(function () {}); }
  setUpSignature();
  setUpSignRequest();
  draftRef = newClientRef();
  restoreDraft().then(function () {
    recallMe();
    stagePhotos();
    return showQuietState();
  }).then(flushQueue).then(showMine);
})();
