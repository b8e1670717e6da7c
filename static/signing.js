/* Signing page: the signature pad, and the checks made before the signature is sent. */
(function () {
  "use strict";
  var form = document.getElementById("sign-form");
  if (!form) { return; }
  document.documentElement.classList.add("js");
  var MESSAGES = JSON.parse(form.getAttribute("data-messages") || "{}");
  function t(text) { return MESSAGES[text] || text; }

  var canvas = document.getElementById("signature-pad");
  var pad = null;
  if (canvas && window.SignaturePad && window.SignatureFit) {
    pad = new window.SignaturePad(canvas, { backgroundColor: "rgba(255,255,255,0)", penColor: "#000" });
    var resize = function () { window.SignatureFit.resize(pad, canvas); };
    window.addEventListener("resize", resize);
    if (window.ResizeObserver) { new ResizeObserver(resize).observe(canvas); }
    resize();
    document.getElementById("signature-clear").addEventListener("click", function () { pad.clear(); });
  }

  function say(id, text) {
    var box = document.getElementById(id);
    if (box) { box.textContent = text; }
  }

  form.addEventListener("submit", function (event) {
    var problems = 0;
    say("image-error", ""); say("qualifier-error", ""); say("reason-error", ""); say("name-error", "");
    var chosen = form.querySelector('input[name="qualifier"]:checked');
    if (!chosen) { say("qualifier-error", t("Please choose one.")); problems += 1; }
    if (chosen && chosen.value === "not_verified" && !form.elements.namedItem("qualifier_reason").value.trim()) {
      say("reason-error", t("Please say why it is not verified.")); problems += 1;
    }
    if (!form.elements.namedItem("name").value.trim()) { say("name-error", t("Please fill this in.")); problems += 1; }
    if (!pad || pad.isEmpty()) { say("image-error", t("Please sign in the box.")); problems += 1; }
    if (problems) {
      event.preventDefault();
      var first = form.querySelector(".error:not(:empty)");
      if (first) { first.scrollIntoView({ block: "center" }); }
      return;
    }
    document.getElementById("sign-image").value = pad.toDataURL("image/png");
  });
})();
