// Fjord console: table filters and an optional auto-refresh. The pages
// work without it.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("input[data-filter]").forEach(function (input) {
    var table = document.getElementById(input.dataset.filter);
    if (!table) return;
    input.addEventListener("input", function () {
      var q = input.value.toLowerCase();
      table.querySelectorAll("tbody tr").forEach(function (tr) {
        tr.hidden = q !== "" && tr.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
  });
  var box = document.getElementById("autorefresh");
  if (!box) return;
  box.checked = localStorage.getItem("fjord.autorefresh") === "1";
  var timer = null;
  function arm() {
    clearTimeout(timer);
    if (box.checked) timer = setTimeout(function () { location.reload(); }, 5000);
  }
  box.addEventListener("change", function () {
    localStorage.setItem("fjord.autorefresh", box.checked ? "1" : "0");
    arm();
  });
  arm();
});
