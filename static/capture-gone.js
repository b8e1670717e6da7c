/* The page of a link that no longer works: say plainly which tickets written with it are
 * still on this phone, so nobody writes them again or thinks they are lost. */
(function () {
  "use strict";
  var box = document.getElementById("gone");
  var line = document.getElementById("kept-here");
  var store = window.idbKeyval;
  if (!box || !line || !store) { return; }
  var language = document.documentElement.lang || "en";
  var tn = window.CrewWords(JSON.parse(box.getAttribute("data-messages") || "{}"), language).tn;
  var token = box.getAttribute("data-token");
  var path = "/c/" + token + "/";
  store.entries().then(function (pairs) {
    var held = pairs.filter(function (pair) {
      var key = String(pair[0]), entry = pair[1] || {};
      var queued = key.indexOf("ticket:") === 0 || key.indexOf("refused:") === 0;
      return queued && token && String(entry.url || "").indexOf(path) >= 0;
    });
    if (!held.length) { return; }
    var names = held.map(function (pair) {
      return (pair[1].payload && pair[1].payload.description || "").slice(0, 60);
    }).filter(Boolean).join("; ");
    line.textContent = tn("{count} ticket written with this link is still on this phone and not lost: {names}.",
                          "{count} tickets written with this link are still on this phone and not lost: {names}.",
                          held.length, { count: new Intl.NumberFormat(language).format(held.length), names: names });
    line.hidden = false;
  }).catch(function () {});
})();
