// drover console: confirmations, a live jobs list, a job page fed by its progress stream.
// The pages work without this script; it only refreshes what the server rendered.
"use strict";

(function () {
  function fmtInt(n) { return Number(n).toLocaleString("en-US"); }
  function fmtBytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0; let v = Number(n);
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[i];
  }
  function fmtDuration(s) {
    s = Math.round(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return (h ? h + "h " : "") + (h || m ? m + "m " : "") + r + "s";
  }

  // Every action asks first; the browser's own dialog is keyboard accessible.
  document.addEventListener("submit", function (ev) {
    const form = ev.target;
    const question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) { ev.preventDefault(); }
  });

  // The jobs list: while a listed job is active, the rows are fetched again every 2 s.
  const body = document.getElementById("jobs-body");
  if (body) {
    const refresh = function () {
      const live = document.getElementById("jobs-body");
      if (!live || live.getAttribute("data-live") !== "true") { return; }
      // Not while the keyboard is on a row: replacing it would lose the focus.
      if (document.hidden || live.contains(document.activeElement)) { setTimeout(refresh, 2000); return; }
      fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (text) {
          const doc = new DOMParser().parseFromString(text, "text/html");
          const fresh = doc.getElementById("jobs-body");
          const summary = doc.getElementById("jobs-summary");
          if (fresh) { live.replaceWith(document.importNode(fresh, true)); }
          if (summary) { document.getElementById("jobs-summary").textContent = summary.textContent; }
        })
        .catch(function () { /* the next round tries again */ })
        .finally(function () { setTimeout(refresh, 2000); });
    };
    setTimeout(refresh, 2000);
  }

  // The live-migration page: while a task runs, the page is fetched again every 2 s.
  const live = document.getElementById("live");
  if (live) {
    const again = function () {
      const now = document.getElementById("live");
      if (!now || now.getAttribute("data-active") !== "true") { return; }
      if (document.hidden || now.contains(document.activeElement)) { setTimeout(again, 2000); return; }
      fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (text) {
          const fresh = new DOMParser().parseFromString(text, "text/html").getElementById("live");
          if (fresh) { now.replaceWith(document.importNode(fresh, true)); }
        })
        .catch(function () { /* the next round tries again */ })
        .finally(function () { setTimeout(again, 2000); });
    };
    setTimeout(again, 2000);
  }

  // A job's page: its progress stream updates the figures and draws the throughput chart.
  const job = document.getElementById("job");
  if (job && job.getAttribute("data-active") === "true" && window.EventSource) {
    const id = job.getAttribute("data-job");
    const kind = job.getAttribute("data-kind");
    const samples = [];
    let previous = null;
    const field = function (name) { return job.querySelectorAll('[data-field="' + name + '"]'); };
    const setText = function (name, text) { field(name).forEach(function (e) { e.textContent = text; }); };

    const draw = function () {
      const line = document.getElementById("chart-line");
      if (!line || samples.length < 2) { return; }
      const max = Math.max.apply(null, samples.map(function (s) { return s.v; })) || 1;
      const t0 = samples[0].t, t1 = samples[samples.length - 1].t;
      const span = Math.max(t1 - t0, 1);
      line.setAttribute("points", samples.map(function (s) {
        return ((s.t - t0) / span * 600).toFixed(1) + "," + (118 - s.v / max * 112).toFixed(1);
      }).join(" "));
      const last = samples[samples.length - 1];
      document.getElementById("chart-caption").textContent =
        "Now " + (last.bytes ? fmtBytes(last.v) + "/s" : fmtInt(last.v) + " rows/s") +
        ", peak " + (last.bytes ? fmtBytes(max) + "/s" : fmtInt(max) + " rows/s") +
        " over the last " + fmtDuration((t1 - t0) / 1000) + ".";
    };

    const update = function (ev) {
      const data = JSON.parse(ev.data);
      const p = data.progress || {};
      setText("phase", data.phase || "—");
      field("state").forEach(function (e) {
        e.textContent = data.state;
        e.className = "state state-" + data.state.toLowerCase();
      });
      // The share done as the pages and the CLI show it (src/jobs/shown.rs): the server's
      // progressPermille (rows of the estimated total, else units); bytes for a data-copy task.
      let permille, label, bytes = false;
      const units = p.unitsTotal !== undefined && p.unitsDone !== undefined ?
        "units " + p.unitsDone + "/" + p.unitsTotal + (p.unitsSkipped ? " (" + p.unitsSkipped + " skipped)" : "") : "";
      if (kind === "data-copy-task") {
        if (p.bytesToDownload !== undefined && p.bytesDownloaded !== undefined) {
          permille = p.bytesToDownload > 0 ? Math.min(1000, Math.floor(p.bytesDownloaded * 1000 / p.bytesToDownload)) : 0;
          label = fmtBytes(p.bytesDownloaded) + " of " + fmtBytes(p.bytesToDownload);
        }
        bytes = true;
      } else {
        permille = p.progressPermille;
        if (permille === undefined && units) { permille = p.unitsTotal > 0 ? Math.floor(p.unitsDone * 1000 / p.unitsTotal) : 0; }
        if (p.rowsTotalEstimate !== undefined) {
          label = fmtInt((p.rowsWritten || 0) + (p.rowsDropped || 0)) + " of ~" + fmtInt(p.rowsTotalEstimate) + " rows" + (units ? " · " + units : "");
        } else { label = units; }
      }
      if (permille !== undefined) {
        permille = Math.min(1000, permille);
        const pct = permille / 10;
        field("progress").forEach(function (e) { e.max = 1000; e.value = permille; });
        setText("percent", Math.floor(permille / 10) + "." + (permille % 10) + " %");
        setText("progress-label", label);
        field("ring").forEach(function (e) { e.setAttribute("stroke-dasharray", pct.toFixed(2) + " 100"); });
        setText("ring-text", Math.floor(pct) + "%");
      }
      const rates = [];
      if (p.rowsPerSecond !== undefined) { rates.push(fmtInt(p.rowsPerSecond) + " rows/s"); }
      if (p.bytesPerSecond !== undefined) { rates.push(fmtBytes(p.bytesPerSecond) + "/s"); }
      if (rates.length) { setText("rate", (data.state === "RUNNING" || data.state === "QUEUED" ? "" : "avg ") + rates.join(" · ")); }
      setText("eta", data.state === "RUNNING" && p.etaSeconds !== undefined ? fmtDuration(p.etaSeconds) : "—");
      field("last-error").forEach(function (e) { e.hidden = !data.lastError; });
      setText("last-error-text", data.lastError || "");
      const counters = document.getElementById("counters");
      Object.keys(p).forEach(function (name) {
        let cell = counters.querySelector('[data-counter="' + name + '"]');
        if (!cell) {
          const row = document.createElement("tr");
          const th = document.createElement("th"); th.scope = "row";
          const code = document.createElement("code"); code.textContent = name; th.appendChild(code);
          cell = document.createElement("td"); cell.className = "num"; cell.setAttribute("data-counter", name);
          row.appendChild(th); row.appendChild(cell); counters.appendChild(row);
        }
        cell.textContent = fmtInt(p[name]);
      });
      // The chart: rows per second where the job counts rows, else bytes per second
      // worked out from the bytes downloaded.
      const now = Date.now();
      let v = null;
      if (p.rowsPerSecond !== undefined) { v = p.rowsPerSecond; }
      else if (p.bytesDownloaded !== undefined) {
        if (previous && now > previous.t) {
          v = Math.max(0, (p.bytesDownloaded - previous.b) * 1000 / (now - previous.t));
        }
        previous = { t: now, b: p.bytesDownloaded };
        bytes = true;
      }
      if (v !== null) {
        samples.push({ t: now, v: v, bytes: p.rowsPerSecond === undefined });
        if (samples.length > 300) { samples.shift(); }
        draw();
      }
    };

    const stream = new EventSource("/ui/jobs/" + encodeURIComponent(id) + "/events?interval=1s");
    stream.addEventListener("state", update);
    stream.addEventListener("progress", update);
    stream.addEventListener("end", function (ev) {
      update(ev);
      stream.close();
      // The final page has the actions of the final state.
      setTimeout(function () { window.location.reload(); }, 500);
    });
    stream.addEventListener("gone", function () { stream.close(); window.location.href = "/ui/jobs"; });
  }
})();
