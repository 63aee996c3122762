// Live timeline: re-fetch the fragment named by [data-poll] every 2 s while a round
// runs (5 s otherwise) and swap it in. Same-origin only; no third-party code.
(function () {
  "use strict";
  var box = document.querySelector("[data-poll]");
  if (!box) { return; }
  var status = document.getElementById("poll-status");
  function live() {
    var t = box.querySelector(".timeline");
    return t && t.getAttribute("data-live") === "true";
  }
  function tick() {
    fetch(box.getAttribute("data-poll"), { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) { throw new Error("session ended: reload to log in again"); }
        if (!r.ok) { throw new Error("update failed (" + r.status + ")"); }
        return r.text();
      })
      .then(function (html) {
        box.innerHTML = html;
        if (status) { status.textContent = ""; }
        setTimeout(tick, live() ? 2000 : 5000);
      })
      .catch(function (err) {
        if (status) { status.textContent = String(err.message || err); }
        if (!/session ended/.test(String(err.message))) { setTimeout(tick, 10000); }
      });
  }
  setTimeout(tick, live() ? 2000 : 5000);
})();
