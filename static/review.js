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

/* Queue bulk selection: the count and dollar total of what is ticked, and "all clean". */
(function () {
  "use strict";
  function summarise() {
    var form = document.getElementById("bulk-form");
    if (!form) { return; }
    var boxes = form.querySelectorAll('input[name="ids"]:checked');
    var cents = 0;
    boxes.forEach(function (box) { cents += Math.round(parseFloat(box.getAttribute("data-total")) * 100); });
    var summary = document.getElementById("bulk-summary");
    var button = document.getElementById("bulk-approve");
    var pack = document.getElementById("backup-package");
    if (pack) { pack.disabled = boxes.length === 0; }
    if (summary) {
      summary.textContent = boxes.length ? boxes.length + " selected · $" +
        (cents / 100).toLocaleString("en-US", {minimumFractionDigits: 2, maximumFractionDigits: 2}) : "";
    }
    if (button) {
      button.disabled = boxes.length === 0;
      button.textContent = boxes.length ? "Approve " + boxes.length + " selected" : "Approve selected";
    }
  }
  document.addEventListener("change", function (event) {
    if (event.target.matches('#bulk-form input[name="ids"]')) { summarise(); }
  });
  document.addEventListener("click", function (event) {
    if (!event.target.closest("[data-select-clean]")) { return; }
    document.querySelectorAll('#bulk-form input[name="ids"]').forEach(function (box) {
      box.checked = box.getAttribute("data-ready") === "1";
    });
    summarise();
  });
  document.addEventListener("DOMContentLoaded", summarise);
  document.addEventListener("htmx:afterSettle", summarise);
})();

/* Ticket page: every line to check is confirmed or given a code before Approve is enabled;
   a code of another cost type is warned about; photos open in a viewer on the page. */
(function () {
  "use strict";
  function gate() {
    var form = document.getElementById("approve-form");
    if (!form) { return; }
    var allowUnrouted = form.querySelector('input[name="allow_unrouted"]');
    var dailyLog = form.elements.namedItem("destination");
    dailyLog = dailyLog && dailyLog.value === "daily_log";  // a daily log entry carries no code
    var open = 0;
    document.querySelectorAll("tr[data-check]").forEach(function (row) {
      var line = row.getAttribute("data-line");
      var picked = row.querySelector('select[name="routes[' + line + ']"]');
      var confirm = row.querySelector('input[name="confirm[' + line + ']"]');
      var decided = (picked && picked.value !== "") || (confirm && confirm.checked) ||
        (row.getAttribute("data-check") === "pick" && allowUnrouted && allowUnrouted.checked);
      row.classList.toggle("decided", !!decided);
      if (!decided) { open += 1; }
    });
    document.querySelectorAll('button.approve[form="approve-form"]').forEach(function (button) {
      button.disabled = open > 0 && !dailyLog;
    });
    var status = document.getElementById("check-status");
    if (status) {
      status.textContent = dailyLog ? "A daily log entry carries no budget codes: nothing to check." :
        open ? open + (open === 1 ? " line" : " lines") + " to check: confirm each or pick a budget code." :
        "Every line has its budget code.";
    }
  }
  function warnType(select) {
    var option = select.options[select.selectedIndex];
    var warning = select.parentElement.querySelector(".type-warning");
    if (!warning) { return; }
    var other = option && option.value !== "" && option.getAttribute("data-cost-type") !== select.getAttribute("data-line-type");
    warning.hidden = !other;
  }
  document.addEventListener("change", function (event) {
    if (event.target.matches('select[name^="routes["]')) { warnType(event.target); }
    if (event.target.closest("#ticket-panel")) { gate(); }
  });
  document.addEventListener("DOMContentLoaded", gate);
  document.addEventListener("htmx:afterSettle", gate);
  document.addEventListener("click", function (event) {
    var link = event.target.closest("a[data-viewer]");
    if (!link) { return; }
    var viewer = document.getElementById("photo-viewer");
    if (!viewer || typeof viewer.showModal !== "function") { return; }
    event.preventDefault();
    var image = document.getElementById("photo-viewer-image");
    image.src = link.getAttribute("data-viewer");
    image.alt = link.querySelector("img") ? link.querySelector("img").alt : "Photo";
    document.getElementById("photo-viewer-caption").textContent = link.getAttribute("data-caption") || "";
    viewer.showModal();
  });
})();

/* The queue refreshes itself every 20 s, one request at a time: the next is scheduled only
   when the last has finished, waits while tickets are ticked or a bulk result is shown,
   and backs off (doubling up to 5 minutes) while Procore is away or the server errs. */
(function () {
  "use strict";
  var BASE = 20000, MAX = 300000;
  var delay = BASE, timer = null, inFlight = false;
  function rows() { return document.getElementById("queue-rows"); }
  function busy() {
    return document.querySelector('#bulk-form input[name="ids"]:checked, .bulk-confirm, .bulk-results');
  }
  function schedule() {
    clearTimeout(timer);
    if (rows()) { timer = setTimeout(refresh, delay); }
  }
  function finished(ok) {
    inFlight = false;
    var section = rows();
    var away = !ok || (section && section.getAttribute("data-procore") === "down");
    delay = away ? Math.min(delay * 2, MAX) : BASE;
    schedule();
  }
  function refresh() {
    var section = rows();
    if (!section || !window.htmx) { return; }
    if (inFlight || busy()) { schedule(); return; }
    inFlight = true;
    var ok = true;
    var failed = function () { ok = false; };
    document.addEventListener("htmx:responseError", failed, {once: true});
    document.addEventListener("htmx:sendError", failed, {once: true});
    htmx.ajax("GET", section.getAttribute("data-refresh-url"), {target: "#queue-rows", swap: "outerHTML"})
      .then(function () { finished(ok); }, function () { finished(false); })
      .then(function () {
        document.removeEventListener("htmx:responseError", failed);
        document.removeEventListener("htmx:sendError", failed);
      });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var section = rows();
    if (section && section.getAttribute("data-procore") === "down") { delay = BASE * 2; }
    schedule();
  });
})();

/* Set the queue's filter boxes from the URL when htmx restores a page from its history: its
   snapshot keeps the boxes as the page first drew them, not as they were chosen since. */
(function () {
  "use strict";
  var MORE = ["to_check", "unsigned", "awaiting_signature", "from", "to"];
  function matchUrl() {
    var form = document.getElementById("queue-filters");
    if (!form) { return; }
    var params = new URLSearchParams(window.location.search);
    form.querySelectorAll("select[name], input[name]").forEach(function (control) {
      if (control.type === "checkbox") {
        control.checked = params.has(control.name);
      } else if (control.type !== "hidden") {
        control.value = params.get(control.name) || "";
      }
    });
    var more = form.querySelector("details.more-filters");
    if (more && MORE.some(function (name) { return params.has(name); })) { more.open = true; }
  }
  document.addEventListener("htmx:historyRestore", matchUrl);
})();

/* Ticket page: a budget-code picker narrowed by typing a code, a name or the crew's own words
   ("22-", "plumb", "limpieza"); options that do not match are taken out of the list (phones and
   tablets show hidden options anyway) and put back when the search is cleared. A search that
   leaves one code, or one of the line's cost type, picks it. */
(function () {
  "use strict";
  function fold(text) {
    return (text || "").normalize("NFD").replace(/[\u0300-\u036f]/g, "").toLowerCase();
  }
  function picker(search) {
    return search.parentElement.querySelector('select[name="routes[' + search.getAttribute("data-line") + ']"]');
  }
  function filter(search) {
    var select = picker(search);
    if (!select) { return; }
    if (!select._all) {
      select._all = Array.prototype.map.call(select.children, function (node) { return node.cloneNode(true); });
    }
    var words = fold(search.value).split(/\s+/).filter(Boolean);
    var kept = select.value;
    var matches = function (option) {
      var text = fold(option.textContent + " " + (option.getAttribute("data-search") || ""));
      return option.value === "" || words.every(function (word) { return text.indexOf(word) !== -1; });
    };
    while (select.firstChild) { select.removeChild(select.firstChild); }
    select._all.forEach(function (node) {
      var copy = node.cloneNode(true);
      if (copy.tagName === "OPTGROUP") {
        Array.prototype.slice.call(copy.children).forEach(function (option) {
          if (!matches(option)) { copy.removeChild(option); }
        });
        if (copy.children.length) { select.appendChild(copy); }
      } else if (matches(copy)) {
        select.appendChild(copy);
      }
    });
    select.value = kept;
    if (select.value !== kept) { select.value = ""; }
    var left = select.querySelectorAll('option:not([value=""])');
    var found = left.length;
    search.setAttribute("aria-description", found + (found === 1 ? " code matches" : " codes match"));
    // The search leaves one code, or one of the line's own cost type beside codes of other
    // types ("06-100" on a labor line: 06-100.L, not .E or .M): it is the one picked.
    var type = select.getAttribute("data-line-type");
    var exact = Array.prototype.filter.call(left, function (option) {
      return type && option.getAttribute("data-cost-type") === type;
    });
    var pick = found === 1 ? left[0] : exact.length === 1 ? exact[0] : null;
    if (pick && words.length && select.value !== pick.value) {
      select.value = pick.value;
      select.dispatchEvent(new Event("change", {bubbles: true}));
    }
  }
  document.addEventListener("input", function (event) {
    if (event.target.matches("input.code-search")) { filter(event.target); }
  });
})();

/* Bulk approval with progress: the confirmed tickets are written one request at a time, a
   bar counting them and each ticket's result showing as it lands; the results stay on the
   page (the queue does not refresh over them). Without this script the form writes them all
   in one request. */
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id !== "bulk-write-form" || !window.fetch) { return; }
    event.preventDefault();
    event.stopPropagation();
    var ids = Array.prototype.map.call(form.querySelectorAll('input[name="ids"]'), function (input) {
      return input.value;
    });
    var box = form.closest(".bulk-confirm");
    var results = document.createElement("div");
    results.className = "bulk-results card";
    results.setAttribute("role", "status");
    results.innerHTML = '<h2 class="bulk-progress-title"></h2><progress max="' + ids.length +
      '" value="0"></progress><ul class="bulk-list"></ul>';
    box.replaceWith(results);
    // While they are written the queue's own selection is put away: nothing else is approved
    // or confirmed over them (the rows come back fresh when the last one is done).
    var rowsForm = document.getElementById("bulk-form");
    if (rowsForm) {
      rowsForm.querySelectorAll('input[name="ids"], button').forEach(function (control) {
        control.checked = false;
        control.disabled = true;
      });
      var summary = document.getElementById("bulk-summary");
      if (summary) { summary.textContent = ""; }
    }
    var title = results.querySelector("h2"), bar = results.querySelector("progress");
    var list = results.querySelector("ul");
    var done = 0, counted = {written: 0, already: 0, refused: 0};
    var waitFor = 0;
    // While a ticket is on its way, ask every second whether Procore's rate limit holds it.
    function watchWait(stillPending) {
      setTimeout(function () {
        if (!stillPending()) { return; }
        fetch(form.getAttribute("data-wait-url"), {credentials: "same-origin"})
          .then(function (answer) { return answer.ok ? answer.json() : {wait_s: 0}; })
          .then(function (answer) {
            if (!stillPending()) { return; }
            waitFor = answer.wait_s || 0;
            say();
            watchWait(stillPending);
          }, function () { watchWait(stillPending); });
      }, 1000);
    }
    function say() {
      title.textContent = done < ids.length ?
        "Writing " + (done + 1) + " of " + ids.length + " to Procore…" +
          (waitFor > 0 ? " Waiting for Procore's rate limit (" + waitFor + " s)" : "") :
        counted.written + " written, " + counted.already + " already in Procore, " +
        counted.refused + " not written";
    }
    function finish() {
      say();
      var section = document.getElementById("queue-rows");
      if (!window.htmx || !section) { return; }
      // The rows again without the written tickets, the results kept above them.
      htmx.ajax("GET", section.getAttribute("data-refresh-url"), {target: "#queue-rows", swap: "outerHTML"})
        .then(function () {
          var fresh = document.getElementById("queue-rows");
          var rowsForm = fresh && fresh.querySelector("#bulk-form");
          if (rowsForm) { rowsForm.parentNode.insertBefore(results, rowsForm); } else if (fresh) { fresh.appendChild(results); }
        });
    }
    function one(index) {
      if (index >= ids.length) { finish(); return; }
      var data = new FormData();
      data.append("csrf_token", form.querySelector('input[name="csrf_token"]').value);
      data.append("from", form.querySelector('input[name="from"]').value);
      data.append("ids", ids[index]);
      form.querySelectorAll('input[name^="suggest[' + ids[index] + ']"]').forEach(function (input) {
        data.append(input.name, input.value);
      });
      var pending = true;
      watchWait(function () { return pending; });
      fetch(form.getAttribute("data-one-url"), {method: "POST", body: data, credentials: "same-origin"})
        .then(function (answer) { return answer.ok ? answer.text() : Promise.reject(answer.status); })
        .then(function (html) {
          list.insertAdjacentHTML("beforeend", html);
          var item = list.lastElementChild, outcome = item && item.getAttribute("data-outcome");
          if (outcome in counted) { counted[outcome] += 1; }
        }, function () {
          counted.refused += 1;
          var item = document.createElement("li");
          item.textContent = "A ticket could not be sent; it stays in the queue.";
          list.appendChild(item);
        })
        .then(function () { pending = false; waitFor = 0; done += 1; bar.value = done; say(); one(index + 1); });
    }
    say();
    one(0);
  }, true);
})();
