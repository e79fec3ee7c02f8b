// Client-side sort and filter for pabench leaderboard tables: no dependencies, no network.
(function () {
  "use strict";

  function cellKey(row, index, numeric) {
    var cell = row.cells[index];
    if (!numeric) return cell.textContent.trim().toLowerCase();
    var raw = cell.getAttribute("data-value");
    return raw === null || raw === "" ? null : parseFloat(raw);
  }

  function entryRows(body) {
    return Array.prototype.filter.call(body.rows, function (r) {
      return !r.classList.contains("group-head");
    });
  }

  function sortBy(table, th, index) {
    var numeric = th.getAttribute("data-sort") === "num";
    var current = th.getAttribute("aria-sort");
    var first = th.getAttribute("data-first") === "desc" ? "descending" : "ascending";
    var dir = current === first ? (first === "ascending" ? "descending" : "ascending") : first;
    var sign = dir === "ascending" ? 1 : -1;
    // each body sorts on its own: the reference and controls stay apart from ranked rows
    Array.prototype.forEach.call(table.tBodies, function (body) {
      var rows = entryRows(body);
      rows.sort(function (a, b) {
        var x = cellKey(a, index, numeric), y = cellKey(b, index, numeric);
        if (x === null || y === null) return x === y ? 0 : x === null ? 1 : -1; // missing last
        return x < y ? -sign : x > y ? sign : 0;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) {
      c.removeAttribute("aria-sort");
    });
    th.setAttribute("aria-sort", dir);
  }

  function applyFilter(table) {
    var box = document.querySelector('[data-filter="' + table.id + '"]');
    var pareto = document.querySelector('[data-pareto-only="' + table.id + '"]');
    var query = box ? box.value.trim().toLowerCase() : "";
    var onlyPareto = pareto ? pareto.checked : false;
    var shown = 0, total = 0;
    Array.prototype.forEach.call(table.tBodies, function (body) {
      var rows = entryRows(body), inBody = 0;
      rows.forEach(function (r) {
        var name = (r.getAttribute("data-name") || r.textContent).toLowerCase();
        var ok = name.indexOf(query) !== -1 &&
          (!onlyPareto || r.getAttribute("data-pareto") === "1");
        r.hidden = !ok;
        if (ok) inBody += 1;
      });
      Array.prototype.forEach.call(body.querySelectorAll("tr.group-head"), function (h) {
        h.hidden = inBody === 0;
      });
      shown += inBody;
      total += rows.length;
    });
    var count = document.querySelector('[data-count="' + table.id + '"]');
    if (count) count.textContent = shown + " of " + total + " shown";
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
      var button = th.querySelector("button");
      if (!th.hasAttribute("data-sort") || !button) return;
      button.addEventListener("click", function () { sortBy(table, th, index); });
    });
    if (!table.id) return;
    document.querySelectorAll('[data-filter="' + table.id + '"], [data-pareto-only="' +
        table.id + '"]').forEach(function (control) {
      control.addEventListener("input", function () { applyFilter(table); });
    });
    applyFilter(table);
  });
})();
