// Live pages: every element with [data-poll] re-fetches the fragment it names and swaps
// it in, without a reload: the timeline every 2 s while a round runs (5 s otherwise),
// the others every [data-interval] ms. A <details> the reader opened stays open. Same
// origin only; no third-party code.
(function () {
  "use strict";
  var boxes = document.querySelectorAll("[data-poll]");
  if (!boxes.length) { return; }
  var status = document.getElementById("poll-status");
  function running() {
    var t = document.querySelector(".timeline");
    return t !== null && t.getAttribute("data-live") === "true";
  }
  function interval(box) {
    var own = parseInt(box.getAttribute("data-interval") || "", 10);
    if (own > 0) { return own; }
    return running() ? 2000 : 5000;
  }
  function key(details) {
    var s = details.querySelector("summary");
    return s ? s.textContent.replace(/\(\d+\)|\d+/g, "").trim() : "";
  }
  function swap(box, html) {
    var open = {};
    box.querySelectorAll("details[open]").forEach(function (d) { open[key(d)] = true; });
    var shut = {};
    box.querySelectorAll("details:not([open])").forEach(function (d) { shut[key(d)] = true; });
    box.innerHTML = html;
    box.querySelectorAll("details").forEach(function (d) {
      if (open[key(d)]) { d.open = true; } else if (shut[key(d)]) { d.open = false; }
    });
  }
  function poll(box) {
    function tick() {
      fetch(box.getAttribute("data-poll"), { credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          if (r.status === 401) { throw new Error("session ended: reload to log in again"); }
          if (!r.ok) { throw new Error("update failed (" + r.status + ")"); }
          return r.text();
        })
        .then(function (html) {
          swap(box, html);
          if (status) { status.textContent = ""; }
          setTimeout(tick, interval(box));
        })
        .catch(function (err) {
          if (status) { status.textContent = String(err.message || err); }
          if (!/session ended/.test(String(err.message))) { setTimeout(tick, 10000); }
        });
    }
    setTimeout(tick, interval(box));
  }
  boxes.forEach(poll);
})();
