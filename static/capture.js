/* Capture page: rows, photo compression, signature, and a queue on the phone so a
 * ticket written on one bar of signal is never lost. Every ticket carries a client
 * reference, so sending it again can never make a second ticket. */
(function () {
  "use strict";

  var MAX_PHOTOS = 12;
  var LONG_EDGE = 2048;
  var TARGET_BYTES = 350 * 1024;
  var QUEUE_PREFIX = "ticket:";
  var REFUSED_PREFIX = "refused:";
  var SENT_PREFIX = "sent:";
  var store = window.idbKeyval;
  var form = document.getElementById("ticket-form");
  if (!form) { return; }
  document.documentElement.classList.add("js");

  var statusBox = document.getElementById("queue-status");
  var progress = document.getElementById("upload-progress");
  var photoList = document.getElementById("photo-list");
  var photoInput = form.querySelector("input[name=photo_files]");
  var photos = [];
  var rowCounter = 100;
  var signaturePad = null;
  var sending = false;
  var restoredKey = null;
  var correcting = null;

  function newClientRef() {
    if (window.crypto && crypto.randomUUID) { return crypto.randomUUID(); }
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) { return ("0" + b.toString(16)).slice(-2); }).join("");
  }

  function showStatus(kind, text) {
    statusBox.hidden = false;
    statusBox.className = "queue-status " + kind;
    statusBox.textContent = text;
  }

  document.body.addEventListener("htmx:configRequest", function (event) {
    rowCounter += 1;
    event.detail.parameters.i = rowCounter;
  });

  form.addEventListener("click", function (event) {
    var button = event.target.closest(".remove-row");
    if (button) {
      var row = button.closest(".row");
      if (row) { row.remove(); }
    }
  });

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

  function blobToDataUrl(blob) {
    return new Promise(function (resolve, reject) {
      var reader = new FileReader();
      reader.onload = function () { resolve(reader.result); };
      reader.onerror = reject;
      reader.readAsDataURL(blob);
    });
  }

  /* Scale to at most 2048 px on the long edge and re-encode as JPEG, lowering the
   * quality until the photo fits the target size. Re-encoding also drops EXIF. */
  function compress(file) {
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
    }).then(function (blob) {
      return blobToDataUrl(blob).then(function (url) { return { dataUrl: url, size: blob.size }; });
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
      remove.textContent = "×";
      remove.setAttribute("aria-label", "Remove " + photo.name);
      remove.addEventListener("click", function () { photos.splice(index, 1); renderPhotos(); });
      item.appendChild(image);
      item.appendChild(remove);
      photoList.appendChild(item);
    });
  }

  if (photoInput) {
    photoInput.addEventListener("change", function () {
      var files = Array.prototype.slice.call(photoInput.files || []);
      var room = MAX_PHOTOS - photos.length;
      var error = form.querySelector('[data-error-for="photos"]');
      error.textContent = files.length > room ? "Only " + MAX_PHOTOS + " photos fit on one ticket." : "";
      files.slice(0, Math.max(room, 0)).reduce(function (chain, file) {
        return chain.then(function () {
          return compress(file).then(function (result) {
            photos.push({ name: file.name || "photo.jpg", data_url: result.dataUrl,
                          size: result.size, taken_at: new Date(file.lastModified || Date.now()).toISOString() });
            renderPhotos();
          }).catch(function () {
            error.textContent = "Could not read " + (file.name || "a photo") + "; try taking it again.";
          });
        });
      }, Promise.resolve()).then(function () { photoInput.value = ""; });
    });
  }

  function setUpSignature() {
    var canvas = document.getElementById("signature-pad");
    if (!canvas || !window.SignaturePad) { return; }
    signaturePad = new window.SignaturePad(canvas, { backgroundColor: "rgba(255,255,255,0)" });
    function resize() {
      var ratio = Math.max(window.devicePixelRatio || 1, 1);
      var data = signaturePad.toData();
      canvas.width = canvas.offsetWidth * ratio;
      canvas.height = canvas.offsetHeight * ratio;
      canvas.getContext("2d").scale(ratio, ratio);
      signaturePad.clear();
      signaturePad.fromData(data);
    }
    window.addEventListener("resize", resize);
    resize();
    document.getElementById("signature-clear").addEventListener("click", function () { signaturePad.clear(); });
  }

  /* The ticket's own text fields: every named field of the form's ticket-fields section. */
  function ticketFields() {
    return Array.prototype.map.call(form.querySelectorAll("[data-ticket-fields] [name]"),
                                    function (field) { return field.name; });
  }

  function value(name) {
    var field = form.elements.namedItem(name);
    return field && field.value !== undefined ? field.value.trim() : "";
  }

  function collectRows(kind) {
    var rows = [];
    form.querySelectorAll('.rows[data-kind="' + kind + '"] > .row').forEach(function (row) {
      var entry = {}, filled = false;
      row.querySelectorAll("input, select").forEach(function (input) {
        var key = input.name.split(".").pop();
        var text = input.value.trim();
        /* A pick list always has a value (the hour type): it alone does not make a line. */
        if (text !== "") { entry[key] = text; filled = filled || input.tagName !== "SELECT"; }
      });
      rows.push(filled ? entry : null);
    });
    return rows;
  }

  function buildPayload() {
    var payload = {
      labor: [], equipment: [], materials: [],
      photos: photos.map(function (p) { return { name: p.name, data_url: p.data_url, taken_at: p.taken_at }; }),
      client_ref: newClientRef()
    };
    ticketFields().forEach(function (name) { payload[name] = value(name); });
    if (correcting) { payload.revises = correcting; }
    ["labor", "equipment", "materials"].forEach(function (kind) {
      payload[kind] = collectRows(kind).filter(function (row) { return row !== null; });
    });
    if (signaturePad && !signaturePad.isEmpty()) {
      payload.signature = { name: value("signature.name") || null, role: value("signature.role") || null,
                            qualifier: value("signature.qualifier") || null,
                            signed_at: new Date().toISOString(), image: signaturePad.toDataURL("image/png") };
    }
    return payload;
  }

  function clearErrors() {
    form.querySelectorAll(".error").forEach(function (el) {
      if (el.getAttribute("data-error-for") !== "photos") { el.textContent = ""; }
    });
    form.querySelectorAll(".has-error").forEach(function (el) { el.classList.remove("has-error"); });
    var top = form.querySelector(".js-form-error");
    top.hidden = true;
  }

  /* Server paths count only the rows that were sent; map them back to rows on screen. */
  function fieldForPath(path) {
    var match = /^(labor|equipment|materials)\[(\d+)\]\.(\w+)$/.exec(path);
    if (!match) { return form.querySelector('[data-error-for="' + path + '"]'); }
    var sentIndex = parseInt(match[2], 10), seen = -1, target = null;
    form.querySelectorAll('.rows[data-kind="' + match[1] + '"] > .row').forEach(function (row) {
      var filled = Array.prototype.some.call(row.querySelectorAll("input"), function (i) { return i.value.trim() !== ""; });
      if (filled) { seen += 1; }
      if (filled && seen === sentIndex && !target) {
        target = row.querySelector('[data-error-for$="].' + match[3] + '"]');
      }
    });
    return target;
  }

  function showErrors(error) {
    clearErrors();
    var top = form.querySelector(".js-form-error");
    top.textContent = "Please fix the marked fields.";
    top.hidden = false;
    (error.details || []).forEach(function (detail) {
      var path = detail.field.replace(/\.data_url$/, "").replace(/^photos\[\d+\]$/, "photos");
      var box = fieldForPath(detail.field) || fieldForPath(path) || top;
      box.textContent = box === top ? top.textContent + " " + detail.message : detail.message;
      var label = box.closest ? box.closest(".field") : null;
      if (label) { label.classList.add("has-error"); }
    });
    var first = form.querySelector(".has-error input, .has-error textarea");
    if (first) { first.focus(); }
  }

  function send(entry, onProgress) {
    return new Promise(function (resolve) {
      var request = new XMLHttpRequest();
      request.open("POST", entry.url);
      request.setRequestHeader("Content-Type", "application/json");
      request.setRequestHeader("Accept", "application/json");
      request.timeout = 120000;
      if (onProgress) {
        request.upload.onprogress = function (event) {
          if (event.lengthComputable) { onProgress(Math.round(100 * event.loaded / event.total)); }
        };
      }
      request.onload = function () {
        var body = null;
        try { body = JSON.parse(request.responseText); } catch (e) { body = null; }
        if (request.status === 200) { resolve({ state: "sent", body: body }); }
        else if (request.status === 400 || request.status === 404 || request.status === 409 || request.status === 410 || request.status === 413) {
          resolve({ state: "refused", status: request.status, body: body });
        } else { resolve({ state: "later", status: request.status }); }
      };
      request.onerror = request.ontimeout = function () { resolve({ state: "later" }); };
      request.send(JSON.stringify(entry.payload));
    });
  }

  function remember(entry) {
    return store ? store.set(QUEUE_PREFIX + entry.payload.client_ref, entry).catch(function () {}) : Promise.resolve();
  }

  function forget(entry) {
    return store ? store.del(QUEUE_PREFIX + entry.payload.client_ref).catch(function () {}) : Promise.resolve();
  }

  /* Sent tickets stay listed on this phone (by their client reference, which only this phone
     holds), so the crew sees what became of each and can correct one that was sent back. */
  function rememberSent(entry, body) {
    if (!store || !body) { return Promise.resolve(); }
    var record = { url: entry.url, client_ref: entry.payload.client_ref, reference: body.reference,
                   payload: entry.payload, sent_at: new Date().toISOString() };
    var drop = entry.payload.revises ? store.del(SENT_PREFIX + entry.payload.revises) : Promise.resolve();
    return drop.then(function () { return store.set(SENT_PREFIX + entry.payload.client_ref, record); })
      .catch(function () {}).then(showMine);
  }

  function correct(record) {
    fillForm(record.payload);
    correcting = record.client_ref;
    form.hidden = false;
    document.getElementById("done").hidden = true;
    showStatus("saved", "Correcting " + record.reference + ": change what is needed and send it again. It stays the same ticket.");
    form.scrollIntoView();
  }

  function showMine() {
    var section = document.getElementById("my-tickets");
    if (!store || !section) { return Promise.resolve(); }
    var url = form.getAttribute("data-submit-url").split("?")[0];
    return store.keys().then(function (keys) {
      var mine = keys.filter(function (key) { return String(key).indexOf(SENT_PREFIX) === 0; });
      return Promise.all(mine.map(function (key) { return store.get(key); }));
    }).then(function (records) {
      records = records.filter(function (r) { return r && r.url.split("?")[0] === url; });
      if (!records.length) { section.hidden = true; return; }
      var byRef = {};
      records.forEach(function (r) { byRef[r.client_ref] = r; });
      return fetch(section.getAttribute("data-mine-url"), {
        method: "POST", headers: { "Content-Type": "application/json", "Accept": "application/json" },
        body: JSON.stringify({ client_refs: Object.keys(byRef) })
      }).then(function (response) { return response.ok ? response.json() : { data: [] }; })
        .then(function (answer) {
          var list = document.getElementById("my-tickets-list");
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
            if (ticket.status === "rejected" && record) {
              var button = document.createElement("button");
              button.type = "button";
              button.className = "secondary";
              button.textContent = "Correct and send again";
              button.addEventListener("click", function () { correct(record); });
              item.appendChild(button);
            }
            list.appendChild(item);
          });
          section.hidden = !(answer.data || []).length;
        });
    }).catch(function () {});
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
                 error: (outcome.body && outcome.body.error) || null };
    return store.set(key, kept).then(function () { return forget(entry); })
      .then(function () { return key; }).catch(function () { return null; });
  }

  function formIsEmpty() {
    return !value("description") && !value("reason") && !value("directed_by") && photos.length === 0 &&
      (!signaturePad || signaturePad.isEmpty());
  }

  function setField(name, text) {
    var field = form.elements.namedItem(name);
    if (field && text !== undefined && text !== null) { field.value = String(text); }
  }

  /* Rows are cloned from the first, so this needs no network. */
  function fillForm(payload) {
    form.reset();
    clearErrors();
    ticketFields().forEach(function (name) { setField(name, payload[name]); });
    ["labor", "equipment", "materials"].forEach(function (kind) {
      var box = form.querySelector('.rows[data-kind="' + kind + '"]');
      var rows = box.querySelectorAll(".row");
      var first = rows[0];
      Array.prototype.slice.call(rows, 1).forEach(function (row) { row.remove(); });
      (payload[kind] || []).forEach(function (line, index) {
        var row = index === 0 ? first : first.cloneNode(true);
        row.querySelectorAll("input, select").forEach(function (input) {
          var key = input.name.split(".").pop();
          var blank = input.tagName === "SELECT" ? input.options[0].value : "";
          input.value = line[key] === undefined || line[key] === null ? blank : String(line[key]);
        });
        if (index > 0) { box.appendChild(row); }
      });
    });
    photos = (payload.photos || []).map(function (p) {
      return { name: p.name, data_url: p.data_url, taken_at: p.taken_at, size: 0 };
    });
    renderPhotos();
    if (payload.signature) {
      setField("signature.name", payload.signature.name);
      setField("signature.role", payload.signature.role);
      setField("signature.qualifier", payload.signature.qualifier);
      if (signaturePad && payload.signature.image) { signaturePad.fromDataURL(payload.signature.image); }
    }
  }

  function linkGone(entry) { return entry.status === 404 || entry.status === 410; }

  function restore(key, entry) {
    restoredKey = key;
    fillForm(entry.payload);
    var gone = linkGone(entry);
    if (!gone && entry.error) { showErrors(entry.error); }
    showStatus("saved", gone ? "This ticket's link no longer works. Check it and send it from here."
      : "This ticket was not accepted. Fix the marked fields and send it again.");
  }

  function offerRefused() {
    if (!store || restoredKey) { return Promise.resolve(); }
    return store.keys().then(function (keys) {
      var refused = keys.filter(function (key) { return String(key).indexOf(REFUSED_PREFIX) === 0; });
      if (!refused.length) { return; }
      return store.get(refused[0]).then(function (entry) {
        if (!entry || !formIsEmpty()) { return; }
        if (!linkGone(entry) && entry.url === form.getAttribute("data-submit-url")) { restore(refused[0], entry); return; }
        showStatus("saved", (refused.length === 1 ? "A ticket" : refused.length + " tickets") +
          " saved on this phone could not be sent" + (linkGone(entry) ? " because its link no longer works" : "") +
          ". It is kept on this phone. ");
        var button = document.createElement("button");
        button.type = "button";
        button.className = "secondary";
        button.textContent = "Open it in this form";
        button.addEventListener("click", function () { restore(refused[0], entry); });
        statusBox.appendChild(button);
      });
    }).catch(function () {});
  }

  function flushQueue() {
    if (!store || sending) { return Promise.resolve(); }
    sending = true;
    return store.keys().then(function (keys) {
      var mine = keys.filter(function (key) { return String(key).indexOf(QUEUE_PREFIX) === 0; });
      return mine.reduce(function (chain, key) {
        return chain.then(function () {
          return store.get(key).then(function (entry) {
            if (!entry) { return; }
            return send(entry).then(function (outcome) {
              if (outcome.state === "sent") {
                showStatus("sent", "Sent. Reference " + outcome.body.reference + ".");
                return forget(entry).then(function () { return rememberSent(entry, outcome.body); });
              }
              if (outcome.state === "refused") { return keepRefused(entry, outcome); }
              if (outcome.status === 507) {
          showStatus("saved", "The server has no room for photos right now. The ticket is kept on this phone and will go later.");
        } else if (outcome.status === 429) {
          showStatus("saved", "Too many tickets through this link for now. The ticket is kept on this phone and will go later.");
        } else {
          showStatus("saved", "Saved on this phone, will send when there is signal.");
        }
            });
          });
        });
      }, Promise.resolve());
    }).catch(function () {}).then(function () { sending = false; }).then(offerRefused);
  }

  function dropRestored() {
    var key = restoredKey;
    restoredKey = null;
    return key && store ? store.del(key).catch(function () {}) : Promise.resolve();
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    clearErrors();
    var entry = { url: form.getAttribute("data-submit-url"), payload: buildPayload(), saved_at: new Date().toISOString() };
    var button = form.querySelector("button[type=submit]");
    button.disabled = true;
    progress.hidden = false;
    progress.value = 0;
    remember(entry).then(dropRestored).then(function () {
      return send(entry, function (percent) { progress.value = percent; });
    }).then(function (outcome) {
      button.disabled = false;
      progress.hidden = true;
      if (outcome.state === "sent") {
        forget(entry);
        correcting = null;
        rememberSent(entry, outcome.body);
        form.hidden = true;
        document.getElementById("done-reference").textContent = outcome.body.reference;
        document.getElementById("done").hidden = false;
        showStatus("sent", "Sent. Reference " + outcome.body.reference + ".");
        window.scrollTo(0, 0);
      } else if (outcome.state === "refused") {
        // Kept on the phone too, so closing the tab loses nothing.
        keepRefused(entry, outcome).then(function (key) { restoredKey = key; });
        showErrors((outcome.body && outcome.body.error) || { details: [] });
        if (outcome.status === 404 || outcome.status === 410) {
          showStatus("saved", "This link no longer works; ask your project manager for a new one.");
        }
      } else {
        form.reset();
        photos = [];
        renderPhotos();
        if (signaturePad) { signaturePad.clear(); }
        if (outcome.status === 507) {
          showStatus("saved", "The server has no room for photos right now. The ticket is kept on this phone and will go later.");
        } else if (outcome.status === 429) {
          showStatus("saved", "Too many tickets through this link for now. The ticket is kept on this phone and will go later.");
        } else {
          showStatus("saved", "Saved on this phone, will send when there is signal.");
        }
        askForBackgroundSync();
      }
    });
  });

  /* On a first visit, ask the worker to keep this page, its assets and empty rows for use offline. */
  function keepThisPage(registration) {
    if (navigator.serviceWorker.controller || !registration.active) { return; }
    var assets = [];
    document.querySelectorAll("script[src], link[rel=stylesheet]").forEach(function (element) {
      assets.push(element.src || element.href);
    });
    var rows = [];
    form.querySelectorAll(".add-row[hx-get]").forEach(function (button) {
      rows.push(new URL(button.getAttribute("hx-get"), location.href).href);
    });
    registration.active.postMessage({ type: "keep-page", page: location.href, rows: rows, assets: assets });
  }

  if (navigator.serviceWorker && window.isSecureContext) {
    navigator.serviceWorker.register("/c/sw.js", { scope: "/c/" }).catch(function () {});
    navigator.serviceWorker.ready.then(keepThisPage).catch(function () {});
    navigator.serviceWorker.addEventListener("message", function (event) {
      if (event.data && event.data.type === "sent") {
        showStatus("sent", "Sent. Reference " + event.data.reference + ".");
      }
    });
  }
  window.addEventListener("online", flushQueue);
  setUpSignature();
  flushQueue().then(showMine);
})();
