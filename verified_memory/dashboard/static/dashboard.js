// verified-memory dashboard: progressive enhancement only. Without this script every
// chart shows (per day and per week, one under the other) and every number is in a table.
(function () {
  "use strict";

  // One chart of each per-day/per-week pair at a time, with buttons to switch.
  document.querySelectorAll(".periods").forEach(function (box) {
    var panes = Array.prototype.slice.call(box.querySelectorAll(":scope > .period"));
    if (panes.length < 2) return;
    var bar = document.createElement("div");
    bar.className = "switch";
    bar.setAttribute("role", "group");
    var buttons = panes.map(function (pane, index) {
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = pane.getAttribute("data-label");
      button.addEventListener("click", function () { show(index); });
      bar.appendChild(button);
      return button;
    });
    function show(chosen) {
      panes.forEach(function (pane, index) { pane.hidden = index !== chosen; });
      buttons.forEach(function (button, index) {
        button.setAttribute("aria-pressed", String(index === chosen));
      });
    }
    box.insertBefore(bar, box.firstChild);
    show(panes.length - 1); // per week first: a few points, each with more verdicts
  });

  // A link to a memory opens its details.
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target && target.tagName === "DETAILS") target.open = true;
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  document.documentElement.classList.add("js");
})();
