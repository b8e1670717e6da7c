/* Capture pages' service worker: keeps a copy of each opened form (page and assets)
 * for use with no signal, network first; any form of a link (QR code, text message, plain
 * link) opens from the copy of another; a revoked link loses its copy. A page is kept only
 * with every script and style it names, each at its exact address (which names its content,
 * ?v=); files no kept page names are dropped. Sends queued tickets when signal returns, even
 * with the page closed (Background Sync, where the browser has it). */
/* global idbKeyval */
importScripts("/static/vendor/idb-keyval-6.3.0.umd.js", "/static/capture-send.js");

var QUEUE_PREFIX = "ticket:";
var REFUSED_PREFIX = "refused:";
var PAGE_CACHE = "capture-pages-v1";
var NETWORK_WAIT_MS = 4000;
var LANGUAGE_KEY = "capture-language";  // the language the crew's pages were last shown in
var PAGE_PATH = /^\/c\/[A-Za-z0-9_-]+(\/[qs])?$/;

function kept(url) {
  if (url.origin !== self.location.origin) { return false; }
  return PAGE_PATH.test(url.pathname) || isAsset(url);
}

/* The token of the link a capture address belongs to. */
function linkOf(url) { return url.pathname.split("/")[2]; }

function forgetLink(url) {
  var token = linkOf(url);
  return caches.open(PAGE_CACHE).then(function (cache) {
    return forget(cache, function (other) {
      return other.pathname === "/c/" + token || other.pathname.indexOf("/c/" + token + "/") === 0;
    });
  });
}

/* The kept copy that answers for an address with no signal: its own; for a page with none, the
 * copy of another form of the same link (QR code, text message, plain link, another ?lang=),
 * the same path first, then the newest kept (keys are in the order they were put). A copy in
 * the crew's language comes first: the one the address asks for (?lang=), else the one the
 * crew's pages were last shown in. The page's script reads from its own address which form
 * the crew opened. */
function keptCopy(cache, url) {
  if (!PAGE_PATH.test(url.pathname)) { return cache.match(url.href, { ignoreVary: true }); }
  var asked = url.searchParams.get("lang");
  var language = asked ? Promise.resolve(asked) : idbKeyval.get(LANGUAGE_KEY).catch(function () { return null; });
  return Promise.all([language, cache.keys()]).then(function (found) {
    var wanted = found[0];
    var forms = found[1].map(function (request) { return new URL(request.url); }).filter(function (other) {
      return PAGE_PATH.test(other.pathname) && linkOf(other) === linkOf(url);
    });
    return Promise.all(forms.map(function (other) { return languageOfCopy(cache, other); })).then(function (languages) {
      function rank(other, index) {
        return (wanted && languages[index] === wanted ? 4 : 0) + (other.href === url.href ? 2 : 0) +
          (other.pathname === url.pathname ? 1 : 0);
      }
      var best = null, bestRank = -1;
      forms.forEach(function (other, index) {  // the newest of the best, as keys come oldest first
        if (rank(other, index) >= bestRank) { best = other; bestRank = rank(other, index); }
      });
      return best ? cache.match(best.href, { ignoreVary: true }) : undefined;
    });
  });
}

/* The language a kept page is in (its <html lang>). */
function languageOfCopy(cache, url) {
  return cache.match(url.href, { ignoreVary: true }).then(function (copy) {
    return copy ? copy.text() : "";
  }).then(function (html) {
    var found = /<html[^>]*\slang="([A-Za-z-]+)"/.exec(html);
    return found ? found[1] : null;
  });
}

/* A kept page's other languages are kept too (each ?lang= its switch offers), so a link in
 * the crew's language opens in it with no signal even when the crew opened another first. A
 * copy is fetched again only when it names other assets than the page (a new release), so
 * no kept language runs an older script and a weak signal carries no page twice. */
function keepLanguages(url, html) {
  var offered = {}, found, pattern = /href="\?lang=([A-Za-z-]+)"/g;
  var own = /<html[^>]*\slang="([A-Za-z-]+)"/.exec(html), assets = assetsOf(html).sort().join(" ");
  while ((found = pattern.exec(html))) { offered[found[1]] = true; }
  if (own) { delete offered[own[1]]; }  // this copy is that language's
  return caches.open(PAGE_CACHE).then(function (cache) {
    return Promise.all(Object.keys(offered).map(function (language) {
      var other = new URL(url.pathname + "?lang=" + language, url.origin);
      return cache.match(other.href, { ignoreVary: true }).then(function (have) {
        return have ? have.text() : null;
      }).then(function (kept) {
        if (kept !== null && assetsOf(kept).sort().join(" ") === assets) { return null; }
        return fetch(other.href, { credentials: "omit" }).then(function (response) {
          return response.status === 200 ? storePage(other, response) : null;
        }).catch(function () {});
      });
    }));
  });
}

function isAsset(url) { return url.pathname.indexOf("/static/") === 0; }

/* Drop the kept copies of which `unwanted(url)` is true. */
function forget(cache, unwanted) {
  return cache.keys().then(function (requests) {
    return Promise.all(requests.filter(function (request) { return unwanted(new URL(request.url)); })
      .map(function (request) { return cache.delete(request); }));
  });
}

var ASSET_REF = /(?:src|href)="(\/static\/[^"?#]+(?:\?[^"#]*)?)"/g;

/* The static addresses a kept page names (its scripts and styles, each at its ?v=). */
function assetsOf(html) {
  var found = [], match;
  ASSET_REF.lastIndex = 0;
  while ((match = ASSET_REF.exec(html)) !== null) {
    found.push(new URL(match[1].replace(/&amp;/g, "&"), self.location.origin).href);
  }
  return found;
}

/* Drop the kept assets that no kept page names any more. */
function pruneAssets(cache) {
  return cache.keys().then(function (requests) {
    var pages = requests.filter(function (request) { return PAGE_PATH.test(new URL(request.url).pathname); });
    return Promise.all(pages.map(function (request) {
      return cache.match(request).then(function (copy) { return copy ? copy.text() : ""; });
    })).then(function (texts) {
      var named = {};
      texts.forEach(function (html) { assetsOf(html).forEach(function (href) { named[href] = true; }); });
      return forget(cache, function (url) { return isAsset(url) && !named[url.href]; });
    });
  });
}

/* A page is kept only once every asset it names is kept too, at that very address: a kept
 * page never meets another version of its script, and a failed asset leaves the older page
 * (with its own assets) in place. */
var writing = Promise.resolve();

/* Pages are stored and assets pruned one after another, so a prune never runs between a
 * page's assets being kept and the page itself. */
function serially(task) {
  writing = writing.then(task, task);
  return writing;
}

function storePage(url, response) {
  var copy = response.clone();
  return response.clone().text().then(function (html) { return serially(function () {
    return caches.open(PAGE_CACHE).then(function (cache) {
      return Promise.all(assetsOf(html).map(function (href) {
        return cache.match(href).then(function (have) {
          if (have) { return null; }
          return fetch(href, { cache: "force-cache", credentials: "omit" }).then(function (answer) {
            if (answer.status !== 200) { throw new Error("asset not kept: " + href); }
            return cache.put(href, answer);
          });
        });
      })).then(function () { return cache.put(url.href, copy); })
        .then(function () { return pruneAssets(cache); });
    });
  }); });
}

function store(url, response) {
  if (response.status === 200 && PAGE_PATH.test(url.pathname)) {
    var html = response.clone().text();
    return storePage(url, response).then(function () { return html; }).then(function (text) {
      return keepLanguages(url, text);
    });
  }
  if (response.status === 200) {
    var copy = response.clone();
    return caches.open(PAGE_CACHE).then(function (cache) { return cache.put(url.href, copy); });
  }
  if (PAGE_PATH.test(url.pathname) && (response.status === 404 || response.status === 410)) { return forgetLink(url); }
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
  // Slow or no network: the kept copy of this very address (or of this link's other form);
  // else keep waiting for the network (a new page must not run an older copy of its script);
  // with no network at all, an asset's other kept version is better than none.
  event.respondWith(Promise.race([fromNetwork, patience]).catch(function () {
    return caches.open(PAGE_CACHE).then(function (cache) {
      return keptCopy(cache, url).then(function (copy) {
        return copy || fromNetwork.catch(function (failure) {
          return (isAsset(url) ? cache.match(url.href, { ignoreVary: true, ignoreSearch: true })
            : Promise.resolve(null)).then(function (other) {
            if (other) { return other; }
            throw failure;
          });
        });
      });
    });
  }));
});

/* For a page loaded before the worker controlled it: the page is fetched again (it is
 * no-store); keeping it keeps its assets, from the HTTP cache. */
function keepPage(message) {
  var url = new URL(String(message.page), self.location.origin);
  if (!PAGE_PATH.test(url.pathname) || !kept(url)) { return Promise.resolve(); }
  return fetch(url.href, { credentials: "omit" })
    .then(function (response) { return store(url, response); })
    .catch(function () {});
}

self.addEventListener("message", function (event) {
  if (event.data && event.data.type === "keep-page") { event.waitUntil(keepPage(event.data)); }
  if (event.data && event.data.type === "send-tickets") { event.waitUntil(sendQueued().catch(function () {})); }
});

/* One ticket after another, part by part, holding the lock the page takes before it sends. */
function sendQueued() {
  return CaptureSend.withLock(function () {
    return idbKeyval.keys().then(function (keys) {
      var mine = keys.filter(function (key) { return String(key).indexOf(QUEUE_PREFIX) === 0; });
      return mine.reduce(function (chain, key) {
        return chain.then(function () { return sendOne(key); });
      }, Promise.resolve());
    });
  });
}

function sendOne(key) {
  return idbKeyval.get(key).then(function (entry) {
    if (!entry) { return null; }
    return tell({ type: "sending" }).then(function () {
      // The open page's tray follows every acknowledged piece.
      return CaptureSend.send(entry, idbKeyval, { progress: function (step) { tell({ type: "progress", step: step }); } });
    }).then(function (outcome) {
      if (outcome.state === "sent") {
        return idbKeyval.del(key).then(function () { return CaptureSend.forget(idbKeyval, entry.payload.client_ref); })
          .then(function () {
            return CaptureSend.recordSent(idbKeyval, entry, outcome.body, outcome.photosRefused, null, outcome.refusals);
          })
          .then(function () { return notify(outcome.body.reference, outcome.photosRefused, outcome.refusals); });
      }
      if (outcome.state === "refused") { return keepRefused(key, entry, outcome); }
      return tell({ type: "waiting", status: outcome.status || 0, code: CaptureSend.codeOf(outcome) || null,
                    missing: outcome.missing || 0 }).then(function () {
        throw new Error("not yet");
      });
    });
  });
}

function keepRefused(key, entry, outcome) {
  var body = outcome.body;
  var kept = { url: entry.url, payload: entry.payload, saved_at: entry.saved_at, status: outcome.status,
               error: (body && body.error) || null, signature: entry.signature || null,
               project_id: entry.project_id || null, project_name: entry.project_name || null };
  return idbKeyval.set(REFUSED_PREFIX + entry.payload.client_ref, kept).then(function () { return idbKeyval.del(key); });
}

function tell(message) {
  return self.clients.matchAll({ type: "window" }).then(function (windows) {
    windows.forEach(function (client) { client.postMessage(message); });
  });
}

function notify(reference, photosRefused, refusals) {
  return tell({ type: "sent", reference: reference, photos_refused: photosRefused || 0, refusals: refusals || [] });
}

self.addEventListener("install", function () { self.skipWaiting(); });
// A new worker keeps only what it would keep itself (older ones also kept empty line rows).
self.addEventListener("activate", function (event) {
  event.waitUntil(caches.open(PAGE_CACHE).then(function (cache) {
    return forget(cache, function (url) { return !kept(url); });
  }).then(function () { return self.clients.claim(); }));
});
self.addEventListener("sync", function (event) {
  if (event.tag === "send-tickets") { event.waitUntil(sendQueued()); }
});
