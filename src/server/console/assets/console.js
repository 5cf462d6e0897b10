// Strata console: the only script. Pages work without it; it adds a
// confirmation before destructive forms and the "/" shortcut to the search box.
"use strict";
document.addEventListener("submit", function (ev) {
  var form = ev.target;
  var question = form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    ev.preventDefault();
  }
});
document.addEventListener("keydown", function (ev) {
  if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  var tag = (document.activeElement && document.activeElement.tagName) || "";
  if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") return;
  var box = document.querySelector("[data-shortcut='/']");
  if (box) {
    ev.preventDefault();
    box.focus();
  }
});
