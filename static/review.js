/* Review pages: small helpers that need no inline script (the CSP forbids it). */
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy-target], [data-copy-text]");
    if (!button) { return; }
    var text = button.getAttribute("data-copy-text");
    if (!text) {
      var source = document.querySelector(button.getAttribute("data-copy-target"));
      text = source ? source.textContent.trim() : "";
    }
    var done = function () { button.textContent = "Copied"; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () {});
    } else {
      var area = document.createElement("textarea");
      area.value = text;
      document.body.appendChild(area);
      area.select();
      try { document.execCommand("copy"); done(); } catch (e) { /* the key stays visible to copy by hand */ }
      area.remove();
    }
  });
})();
