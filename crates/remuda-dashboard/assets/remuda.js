// remuda dashboard: live refresh of the page's content (pausable, remembered per browser),
// and a confirmation before any form marked data-confirm is sent. No inline script anywhere:
// the Content-Security-Policy allows only this file.
(function () {
  "use strict";
  var PERIOD = 5000;
  var button = document.getElementById("live");
  var paused = window.localStorage && localStorage.getItem("remuda.live") === "off";

  function show() {
    if (!button) return;
    button.textContent = paused ? "Live: paused" : "Live: on";
    button.setAttribute("data-state", paused ? "off" : "on");
  }

  function editing() {
    var a = document.activeElement;
    return a && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA");
  }

  function refresh() {
    if (paused || editing() || document.hidden || document.body.hasAttribute("data-static")) return;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Requested-With": "refresh" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) return;
        var next = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        var main = document.getElementById("main");
        if (next && main && !editing()) main.replaceWith(next);
      })
      .catch(function () {});
  }

  if (button) {
    button.addEventListener("click", function () {
      paused = !paused;
      if (window.localStorage) localStorage.setItem("remuda.live", paused ? "off" : "on");
      show();
    });
  }
  show();
  setInterval(refresh, PERIOD);

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });
})();
