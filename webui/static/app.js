// Herald web UI: the few things plain HTML cannot do.
// Elements with data-poll="URL" data-every="ms" replace their content with
// URL's (a server-rendered fragment) every so often, until the fragment
// holds an element with data-final; then the page's elements marked
// data-hide-when-final (an instance's actions, once it has ended) hide.
(function () {
  "use strict";
  function poll(el) {
    var url = el.getAttribute("data-poll");
    var every = parseInt(el.getAttribute("data-every"), 10) || 2000;
    var busy = false;
    var timer = setInterval(function () {
      if (busy || document.hidden) return;
      busy = true;
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) {
          if (r.status === 401 || r.redirected) { clearInterval(timer); return null; }
          return r.ok ? r.text() : null;
        })
        .then(function (html) {
          if (html === null) return;
          el.innerHTML = html; // server-rendered, escaped by html/template
          if (el.querySelector("[data-final]")) {
            clearInterval(timer);
            document.querySelectorAll("[data-hide-when-final]").forEach(function (h) { h.hidden = true; });
          }
        })
        .catch(function () {})
        .finally(function () { busy = false; });
    }, every);
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-poll]").forEach(poll);
    // "/" focuses the page's first search or filter field.
    document.addEventListener("keydown", function (e) {
      if (e.key !== "/" || /^(INPUT|TEXTAREA|SELECT)$/.test(e.target.tagName)) return;
      var f = document.querySelector("main form input:not([type=hidden])");
      if (f) { e.preventDefault(); f.focus(); }
    });
  });
})();
