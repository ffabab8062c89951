// Draws the leaderboard's plotly figures from their json_script blocks, on load and after every
// htmx swap of the board fragment (the raw/adjusted toggle swaps table and charts together).
(function () {
  "use strict";
  var config = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  function draw(root) {
    var scope = root && root.querySelectorAll ? root : document;
    var nodes = scope.querySelectorAll("[data-figure]");
    if (scope.matches && scope.matches("[data-figure]")) nodes = [scope];
    Array.prototype.forEach.call(nodes, function (el) {
      var source = document.getElementById(el.getAttribute("data-figure"));
      if (!source) return;
      var figure = JSON.parse(source.textContent);
      // A figure that sizes itself (the heatmap grows with its rows) sets its box's height too.
      if (figure.layout.height) el.style.height = figure.layout.height + "px";
      window.Plotly.react(el, figure.data, figure.layout, config);
    });
  }

  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.detail.elt); });
})();
