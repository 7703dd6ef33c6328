// The run page's live stream (redflow/ops/dashboard/live.py): items the run writes
// are appended as text (never as HTML) until its end event. No other script runs.
"use strict";
(function () {
  var state = document.getElementById("stream-state");
  var list = document.getElementById("stream-items");
  if (!state || !list || !state.dataset.src || !window.EventSource) {
    return;
  }
  var source = new EventSource(state.dataset.src);
  source.addEventListener("item", function (event) {
    var item = JSON.parse(event.data);
    var row = document.createElement("li");
    var attempt = document.createElement("span");
    attempt.className = "attempt";
    attempt.title = "attempt";
    attempt.textContent = String(item.attempt);
    var value = document.createElement("code");
    value.textContent = item.json;
    row.appendChild(attempt);
    row.appendChild(value);
    list.appendChild(row);
    while (list.children.length > 1000) {
      list.removeChild(list.firstChild);
    }
    state.textContent = "Live: " + list.children.length + " item(s) shown.";
  });
  source.addEventListener("end", function (event) {
    source.close();
    state.textContent = "The run ended: " + JSON.parse(event.data).status + ".";
    state.className = "muted ended";
  });
  source.onerror = function () {
    if (source.readyState === EventSource.CONNECTING) {
      state.textContent = "Reconnecting...";
    }
  };
})();
