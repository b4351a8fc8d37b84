// ironlink fleet view: progressive enhancement, no build step, no library.
// 1. Elements with data-refresh="SECONDS" are replaced (outerHTML) by a GET
//    of data-src (default: this page) sent with X-Ironlink-Fragment, every
//    SECONDS while the tab is visible; the server drops data-refresh from an
//    element that is final (a finished command), which ends its polling.
//    A region with a ticked checkbox, an open <details> or the focus is left
//    alone until they are gone.
//    A table the user sorted (4.) is left alone too.
// 2. Forms with data-async="ID" are POSTed with fetch; the answer (a
//    fragment) replaces the content of element ID, without a page reload.
"use strict";
(function () {
  const due = new WeakMap();
  async function refresh(el) {
    const src = el.dataset.src || location.pathname + location.search;
    try {
      const r = await fetch(src, { headers: { "X-Ironlink-Fragment": "1" }, credentials: "same-origin", cache: "no-store" });
      if (!r.ok) { el.setAttribute("data-refresh-error", String(r.status)); return; }
      const html = await r.text();
      if (el.isConnected) { el.outerHTML = html; }
    } catch (e) {
      el.setAttribute("data-refresh-error", "network");
    }
  }
  function tick() {
    if (document.hidden) { return; }
    const now = Date.now();
    document.querySelectorAll("[data-refresh]").forEach(function (el) {
      // Never throw away what the user is doing: ticked rows, a focused
      // field, an expanded text.
      if (el.querySelector("input[type=checkbox]:checked, details[open], table[data-sorted]") || el.contains(document.activeElement)) { return; }
      const every = Math.max(0.5, parseFloat(el.dataset.refresh) || 5) * 1000;
      const next = due.get(el);
      if (next === undefined) { due.set(el, now + every); return; }
      if (now >= next) { due.set(el, now + every); refresh(el); }
    });
  }
  setInterval(tick, 250);

  // 3. A checkbox with data-check-all="NAME" ticks or unticks every
  //    checkbox named NAME in its form.
  document.addEventListener("change", function (ev) {
    const box = ev.target;
    if (!(box instanceof HTMLInputElement) || !box.dataset.checkAll || !box.form) { return; }
    box.form.querySelectorAll('input[type=checkbox][name="' + box.dataset.checkAll + '"]').forEach(function (b) { b.checked = box.checked; });
  });

  // 4. Tables with data-sortable sort their rows by a column when its head
  //    is clicked (again: the other way); numbers as numbers. The server
  //    order (newest first) comes back with a reload.
  document.addEventListener("click", function (ev) {
    const th = ev.target instanceof Element ? ev.target.closest("table[data-sortable] thead th") : null;
    if (!th) { return; }
    const table = th.closest("table"), body = table.tBodies[0], col = th.cellIndex;
    const rows = Array.from(body.rows).filter(function (r) { return r.cells.length > col; });
    const asc = th.getAttribute("aria-sort") !== "ascending";
    const key = function (r) { return r.cells[col].textContent.trim(); };
    const num = rows.every(function (r) { return key(r) === "" || !isNaN(Number(key(r))); });
    rows.sort(function (a, b) {
      const x = key(a), y = key(b);
      const c = num ? Number(x) - Number(y) : x.localeCompare(y, undefined, { numeric: true });
      return asc ? c : -c;
    });
    table.querySelectorAll("thead th[aria-sort]").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    table.dataset.sorted = String(col);
    rows.forEach(function (r) { body.appendChild(r); });
  });

  document.addEventListener("submit", async function (ev) {
    const form = ev.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.async) { return; }
    ev.preventDefault();
    const btn = ev.submitter;
    const action = (btn && btn.hasAttribute("formaction")) ? btn.formAction : form.action;
    const slot = document.getElementById(form.dataset.async);
    const buttons = form.querySelectorAll("button");
    buttons.forEach(function (b) { b.disabled = true; });
    try {
      const r = await fetch(action, {
        method: "POST", body: new URLSearchParams(new FormData(form)),
        headers: { "X-Ironlink-Fragment": "1" }, credentials: "same-origin",
      });
      const html = await r.text();
      slot.innerHTML = r.ok ? html : '<p class="error" id="post-error"></p>';
      if (!r.ok) {
        const doc = new DOMParser().parseFromString(html, "text/html");
        const msg = doc.getElementById("error");
        slot.querySelector("#post-error").textContent = r.status + ": " + (msg ? msg.textContent : html.trim());
      } else {
        form.reset();
      }
    } catch (e) {
      slot.textContent = "the hub did not answer: " + e;
    } finally {
      buttons.forEach(function (b) { b.disabled = false; });
    }
  });
})();
