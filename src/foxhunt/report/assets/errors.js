/* foxhunt report: record every error on <html data-errors>, before anything else runs. */
(function () {
  "use strict";
  var root = document.documentElement;
  var seen = window.__foxhuntErrors = [];
  function add(message) {
    seen.push(String(message));
    root.setAttribute("data-errors", seen.join(" | "));
  }
  window.__foxhuntError = add;
  window.addEventListener("error", function (ev) {
    if (ev.message) {
      add(ev.message + " (" + (ev.filename || "inline") + ":" + (ev.lineno || 0) + ")");
    } else {
      var t = ev.target || {};
      add("failed to load " + (t.src || t.href || t.tagName || "a resource"));
    }
  }, true);
  window.addEventListener("unhandledrejection", function (ev) {
    var r = ev.reason;
    add("unhandled rejection: " + (r && r.message ? r.message : r));
  });
  document.addEventListener("securitypolicyviolation", function (ev) {
    add("blocked by the content security policy: " + ev.violatedDirective + " " + ev.blockedURI);
  });
  var original = console.error;
  console.error = function () {
    add("console.error: " + Array.prototype.slice.call(arguments).join(" "));
    return original.apply(console, arguments);
  };
})();
