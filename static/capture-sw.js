/* Service worker for capture pages: sends tickets queued on the phone when the
 * browser regains signal, even after the page was closed (Background Sync, where
 * the browser has it). The page itself flushes the same queue on load and online. */
/* global idbKeyval */
importScripts("/static/vendor/idb-keyval-6.3.0.umd.js");

var QUEUE_PREFIX = "ticket:";

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
