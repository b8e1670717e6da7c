/* Service worker for capture pages.
 *
 * It keeps a copy of each capture page the phone has opened, with the scripts, styles and
 * empty line rows it uses, so a crew can open the form again with no signal at all (in a
 * basement, a trench, a lift shaft). Pages are fetched from the network first and the copy
 * is only used when the network fails or has not answered in a few seconds; a link the
 * server says is revoked or unknown loses its copy.
 *
 * It also sends tickets queued on the phone when the browser regains signal, even after the
 * page was closed (Background Sync, where the browser has it). The page itself flushes the
 * same queue on load and online. */
/* global idbKeyval */
importScripts("/static/vendor/idb-keyval-6.3.0.umd.js");

var QUEUE_PREFIX = "ticket:";
var PAGE_CACHE = "capture-pages-v1";
var NETWORK_WAIT_MS = 4000;
var PAGE_PATH = /^\/c\/[A-Za-z0-9_-]+(\/[qs])?$/;
var ROW_PATH = /^\/c\/([A-Za-z0-9_-]+)\/rows\/[a-z]+$/;

/* Rows are asked for with a running number (?i=) the page does not need back: one copy
 * per link and kind serves them all. */
function cacheKey(url) {
  return ROW_PATH.test(url.pathname) ? url.origin + url.pathname : url.href;
}

function kept(url) {
  if (url.origin !== self.location.origin) { return false; }
  return PAGE_PATH.test(url.pathname) || ROW_PATH.test(url.pathname) ||
    url.pathname.indexOf("/static/") === 0;
}

function forgetLink(url) {
  var token = url.pathname.split("/")[2];
  return caches.open(PAGE_CACHE).then(function (cache) {
    return cache.keys().then(function (requests) {
      return Promise.all(requests.filter(function (request) {
        var path = new URL(request.url).pathname;
        return path === "/c/" + token || path.indexOf("/c/" + token + "/") === 0;
      }).map(function (request) { return cache.delete(request); }));
    });
  });
}

function store(url, response) {
  if (response.status === 200) {
    var copy = response.clone();
    return caches.open(PAGE_CACHE).then(function (cache) { return cache.put(cacheKey(url), copy); });
  }
  var linkPath = PAGE_PATH.test(url.pathname) || ROW_PATH.test(url.pathname);
  if (linkPath && (response.status === 404 || response.status === 410)) { return forgetLink(url); }
  return Promise.resolve();
}

self.addEventListener("fetch", function (event) {
  if (event.request.method !== "GET") { return; }
  var url = new URL(event.request.url);
  if (!kept(url)) { return; }
  var fromNetwork = fetch(event.request);
  // Keep the worker alive until the copy is stored, even when the copy already answered.
  event.waitUntil(fromNetwork.then(function (response) { return store(url, response); })
    .catch(function () {}));
  var patience = new Promise(function (resolve, reject) {
    setTimeout(function () { reject(new Error("no answer yet")); }, NETWORK_WAIT_MS);
  });
  event.respondWith(Promise.race([fromNetwork, patience]).catch(function () {
    return caches.open(PAGE_CACHE).then(function (cache) {
      return cache.match(cacheKey(url), { ignoreVary: true });
    }).then(function (copy) { return copy || fromNetwork; });
  }));
});

/* The page asks for this when it was loaded before the worker controlled it: keep the page
 * itself (fetched again, as the server forbids storing it in the HTTP cache), and what it
 * loaded (taken from the HTTP cache when there). */
function keepPage(message) {
  var hrefs = [message.page].concat(message.rows || [], message.assets || []);
  return Promise.all(hrefs.map(function (href) {
    var url = new URL(String(href), self.location.origin);
    if (!kept(url)) { return null; }
    var asset = url.pathname.indexOf("/static/") === 0;
    return fetch(url.href, { cache: asset ? "force-cache" : "default", credentials: "omit" })
      .then(function (response) { return store(url, response); })
      .catch(function () {});
  }));
}

self.addEventListener("message", function (event) {
  if (event.data && event.data.type === "keep-page") { event.waitUntil(keepPage(event.data)); }
});

function sendQueued() {
  return idbKeyval.keys().then(function (keys) {
    var mine = keys.filter(function (key) { return String(key).indexOf(QUEUE_PREFIX) === 0; });
    return Promise.all(mine.map(function (key) {
      return idbKeyval.get(key).then(function (entry) {
        if (!entry) { return null; }
        return fetch(entry.url, {
          method: "POST", body: JSON.stringify(entry.payload), credentials: "omit",
          headers: { "Content-Type": "application/json", "Accept": "application/json" }
        }).then(function (response) {
          if (response.status === 200) {
            return response.json().then(function (body) {
              return idbKeyval.del(key).then(function () { return notify(body.reference); });
            });
          }
          if ([400, 404, 410, 413].indexOf(response.status) >= 0) { return idbKeyval.del(key); }
          throw new Error("not yet");
        });
      });
    }));
  });
}

function notify(reference) {
  return self.clients.matchAll({ type: "window" }).then(function (windows) {
    windows.forEach(function (client) { client.postMessage({ type: "sent", reference: reference }); });
  });
}

self.addEventListener("install", function () { self.skipWaiting(); });
self.addEventListener("activate", function (event) { event.waitUntil(self.clients.claim()); });
self.addEventListener("sync", function (event) {
  if (event.tag === "send-tickets") { event.waitUntil(sendQueued()); }
});
