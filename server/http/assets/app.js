// The Smallem dashboard: hash routes (#/, #/experiments/ID, #/runs/ID,
// #/workers) drawn from the coordinator's JSON endpoints (docs/dashboard.md).
// Pages refresh themselves when the coordinator's change counter moves
// (GET /api/changes waits for it), without reloading. No framework.
"use strict";

const view = document.getElementById("view");
let session = { token_required: false, can_act: false };
let generation = 0;  // bumped on every navigation: stale refresh loops stop
const curves = new Map();  // run id → points, kept across refreshes of a page

// ---- helpers ---------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function svg(tag, attrs) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  return el;
}

async function api(path, options) {
  const res = await fetch(path, Object.assign({ credentials: "same-origin" }, options));
  if (res.status === 401) { location.href = "/login"; throw new Error("log in first"); }
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

// Replaces the page's content; arrays are flattened, null left out.
function mount(...children) {
  view.replaceChildren(...children.flat(2).filter((c) => c !== null && c !== undefined));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function fmt(v, digits = 4) {
  if (v === null || v === undefined) return "—";
  if (typeof v !== "number") return String(v);
  return v.toFixed(digits);
}
function signed(v, digits = 4) {
  if (v === null || v === undefined) return "—";
  return (v > 0 ? "+" : "") + v.toFixed(digits);
}
function duration(s) {
  if (!s) return "—";
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}
function when(ms) { return ms ? new Date(ms).toLocaleString() : "—"; }
function ago(ms, now) { return ms ? `${duration(Math.max(0, (now - ms) / 1000)) || "0 s"} ago` : "—"; }

function statusBadge(status) { return h("span", { class: `badge s-${status}` }, status); }

// A table cell holding a number: shown rounded, the exact value in data-value.
function numCell(key, value, text) {
  return h("td", { class: "num", "data-key": key, "data-value": JSON.stringify(value ?? null) },
           text !== undefined ? text : fmt(value));
}

function actionButton(label, path, confirmText) {
  if (!session.can_act) return null;
  return h("button", {
    class: label === "Cancel" ? "danger" : "", "data-action": path,
    onclick: async () => {
      if (confirmText && !confirm(confirmText)) return;
      try {
        const r = await api(path, { method: "POST", headers: { "X-Smallem-Action": "1" } });
        document.getElementById("live").textContent = `${label}: ${r.changed} run(s) changed`;
      } catch (e) { alert(e.message); }
    } }, label);
}

// ---- refresh ---------------------------------------------------------------

// Calls refresh() whenever the change counter moves, until the page changes.
async function follow(mine, since, refresh) {
  const live = document.getElementById("live");
  while (mine === generation) {
    try {
      const r = await api(`/api/changes?since=${since}`);
      if (mine !== generation) return;
      live.textContent = `live · change ${r.changes}`;
      if (r.changes !== since) { since = r.changes; await refresh(); }
    } catch (e) {
      live.textContent = `disconnected (${e.message}); retrying`;
      await sleep(2000);
    }
  }
}

// ---- experiments -----------------------------------------------------------

// Experiments whose every run was cancelled are left out unless asked for.
let showCancelled = false;

async function experimentsPage(mine) {
  const render = async () => {
    const data = await api(showCancelled ? "/api/experiments?all=1" : "/api/experiments");
    if (mine !== generation) return data;
    const rows = data.experiments.map((e) => {
      const c = e.counts;
      const pct = e.steps_total ? Math.min(100, (100 * e.steps_done) / e.steps_total) : 0;
      return h("tr", { "data-experiment": e.name },
        h("td", {}, h("a", { href: `#/experiments/${e.id}` }, e.name)),
        h("td", {}, ["queued", "leased", "succeeded", "failed", "cancelled"]
          .filter((s) => c[s] > 0).map((s) => h("span", { class: `badge s-${s}`, "data-status": s }, `${c[s]} ${s}`))),
        h("td", { class: "num", "data-key": "total" }, c.total),
        h("td", {}, h("span", { class: "progress", title: `${e.steps_done} / ${e.steps_total} steps` },
                      h("span", { style: `width:${pct.toFixed(1)}%` })), ` ${pct.toFixed(0)} %`),
        h("td", { class: "num" }, c.queued + c.leased > 0 ? duration(e.eta_s) : "done"),
        h("td", {}, e.baseline),
        h("td", { class: "muted" }, when(e.updated_unix_ms)));
    });
    const toggle = data.hidden > 0 || showCancelled
      ? h("label", { class: "muted", id: "show-cancelled" },
          h("input", { type: "checkbox", checked: showCancelled,
                       onchange: (ev) => { showCancelled = ev.target.checked; render(); } }),
          showCancelled ? " show experiments whose every run was cancelled"
                        : ` show ${data.hidden} experiment${data.hidden === 1 ? "" : "s"} whose every run was cancelled`)
      : null;
    mount(
      h("h1", {}, "Experiments"),
      toggle,
      rows.length === 0 ? h("p", { class: "muted" }, "None yet: smallemctl submit GRID.yaml")
        : h("table", { id: "experiments" },
            h("tr", {}, ["experiment", "runs", "total", "progress", "ETA", "baseline", "updated"]
              .map((t) => h("th", {}, t))), rows));
    return data;
  };
  const data = await render();
  follow(mine, data.changes, render);
}

// ---- one experiment --------------------------------------------------------

const STEP_COLUMNS = [
  ["seeds", (r) => numCell("seeds_finished", r.seeds_finished, `${r.seeds_finished}/${r.seeds_expected}`)],
  ["val nats/byte", (r) => numCell("mean_val_nats_per_byte", r.mean_val_nats_per_byte)],
  ["Δ", (r) => numCell("delta", r.delta, signed(r.delta))],
  ["95 % interval", (r) => h("td", { class: "num", "data-key": "ci", "data-value": JSON.stringify([r.ci_low ?? null, r.ci_high ?? null]) },
                             r.ci_low === null || r.ci_low === undefined ? "—" : `[${signed(r.ci_low)}, ${signed(r.ci_high)}]`)],
  ["τ", (r) => numCell("tau", r.tau)],
  ["Δ/τ", (r) => numCell("delta_over_tau", r.delta_over_tau, signed(r.delta_over_tau, 2))],
  ["verdict", (r) => h("td", { "data-key": "verdict", "data-value": JSON.stringify(r.verdict ?? null),
                               class: `v-${r.verdict}`, title: r.verdict_text || "" }, r.verdict ?? "—")],
  ["params", (r) => numCell("params", r.params, r.params ?? "—")],
  // As the CLI's Δ params: the change against the baseline, " !" past the
  // report's warning fraction (a comparison of unequal sizes).
  ["Δ params", (r) => numCell("params_change", r.params_change,
    r.params_change === null || r.params_change === undefined ? "—"
      : `${r.params_change >= 0 ? "+" : ""}${(100 * r.params_change).toFixed(1)} %${r.params_warning ? " !" : ""}`)],
];
const TIME_COLUMNS = [
  ["train s", (r) => numCell("mean_train_seconds", r.mean_train_seconds, fmt(r.mean_train_seconds, 1))],
  ["val nats/byte", (r) => numCell("mean_val_nats_per_byte", r.mean_val_nats_per_byte)],
  ["R(t)", (r) => numCell("reference_loss", r.reference_loss)],
  ["Δ at time", (r) => numCell("delta", r.delta, signed(r.delta))],
  ["Δ/τ", (r) => numCell("delta_over_tau", r.delta_over_tau, signed(r.delta_over_tau, 2))],
  ["verdict", (r) => h("td", { "data-key": "verdict", "data-value": JSON.stringify(r.verdict ?? null),
                               class: `v-${r.verdict}`, title: r.verdict_text || r.pending_reason || "" }, r.verdict ?? "—")],
  ["R(t) extrapolated", (r) => h("td", { "data-key": "extrapolated", "data-value": JSON.stringify(r.extrapolated ?? null) },
                                 r.extrapolated ? `yes (×${fmt(r.span_ratio, 2)})` : "")],
];
const NOISE_COLUMNS = [
  ["seeds", (r) => numCell("seeds", r.seeds, r.seeds)],
  ["spread", (r) => numCell("spread", r.spread)],
  ["s", (r) => numCell("stddev", r.stddev)],
  ["F p", (r) => numCell("f_p", r.f_p, fmt(r.f_p, 3) + (r.departs ? " !" : ""))],
  ["Welch t", (r) => numCell("welch_t", r.welch_t, fmt(r.welch_t, 2))],
  ["seeds to resolve the floor", (r) => numCell("seeds_to_resolve", r.seeds_to_resolve,
                                                r.more_than_max_seeds ? `>${r.seeds_to_resolve}` : (r.seeds_to_resolve ?? "—"))],
];

function reportTable(id, rows, columns) {
  return h("table", { id, class: "report" },
    h("tr", {}, h("th", {}, "variant"), columns.map(([t]) => h("th", {}, t))),
    rows.map((r) => h("tr", { "data-variant": r.variant },
      h("td", {}, r.variant), columns.map(([, cell]) => cell(r)))));
}

function reportSection(data) {
  const out = [h("h2", {}, "Report")];
  const report = data.report;
  if (!report) {
    out.push(h("p", { class: "muted", id: "report-missing" }, data.report_error || "No report yet."));
    return out;
  }
  out.push(h("p", { class: "muted" },
    `baseline ${report.baseline} · ${report.comparison.replaceAll("_", " ")} · noise floor ${fmt(report.noise_floor)} nats/byte` +
    (report.complete ? "" : " · incomplete: pending runs")));
  out.push(h("h3", {}, "At equal steps"), reportTable("report-steps", report.rows || [], STEP_COLUMNS));
  if (report.equal_time) {
    out.push(h("h3", {}, "At equal time"), reportTable("report-time", report.equal_time.rows || [], TIME_COLUMNS));
  }
  if (report.sequential) {
    // Sequential seeds (docs/equal-time.md): where each arm's looks stand.
    const seq = report.sequential;
    out.push(h("h3", {}, "Sequential seeds"),
      h("p", { class: "muted" },
        `looks at ${seq.looks.join(", ")} seeds per arm (at most ${seq.max}), O'Brien–Fleming levels at equal steps` +
        (seq.paused ? " · paused: the experiment has cancelled runs" : "")),
      h("table", { id: "report-looks", class: "report" },
        h("tr", {}, ["arm", "looks", "seeds", "why"].map((t) => h("th", {}, t))),
        seq.arms.map((a) => h("tr", { "data-variant": a.variant },
          h("td", {}, a.variant), h("td", {}, a.baseline ? "-" : `${a.looks_done}/${a.looks}`),
          h("td", { class: "num" }, String(a.seeds)), h("td", {}, a.why)))));
  }
  if (report.noise && report.noise.rows) {
    out.push(h("h3", {}, "Noise"),
      h("p", { class: "muted" }, `pooled σ ${fmt(report.noise.pooled_sigma)} nats/byte (${report.noise.pooled_df} df)`),
      reportTable("report-noise", report.noise.rows, NOISE_COLUMNS));
  }
  const notes = [...(report.notes || []), ...((report.equal_time && report.equal_time.notes) || [])];
  if (notes.length) out.push(h("ul", { class: "notes muted" }, notes.map((n) => h("li", {}, n))));
  if (data.figure_svg && data.runs.some((r) => r.result)) {
    const fig = h("div", { class: "figure", id: "figure" });
    // The coordinator's own SVG (server/report/plot.cc): markup it wrote, escaped.
    fig.innerHTML = data.figure_svg;
    out.push(h("h2", {}, "Figure"), fig);
  }
  return out;
}

// A round step for about `n` intervals across [lo, hi] (1, 2 or 5 × 10^k)
// and the decimals its multiples need.
function roundStep(lo, hi, n) {
  const raw = (hi - lo) / Math.max(1, n) || 1;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((v) => v >= raw * (1 - 1e-9));
  return { step, decimals: Math.max(0, -Math.floor(Math.log10(step) + 1e-9)) };
}

// The run page's training curve: as wide as its box, with round loss and
// step ticks; the loss axis runs from the round value below the lowest loss
// to the one above the highest, so its ticks bracket the curve (the
// experiment page's small multiples keep the compact curveSvg).
function runCurveSvg(run, points) {
  const W = 760, H = 300, L = 56, B = 34, T = 10, R = 14;
  const finite = points.filter((p) => p.loss !== null);
  const root = svg("svg", { class: "live-curve run-curve", "data-run": run.id,
                            "data-points": finite.length, viewBox: `0 0 ${W} ${H}`,
                            preserveAspectRatio: "xMinYMin meet" });
  root.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }),
              svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  if (finite.length === 0) return root;
  const maxStep = Math.max(run.progress.total_steps || 0, ...finite.map((p) => p.step), 1);
  let lo = Math.min(...finite.map((p) => p.loss)), hi = Math.max(...finite.map((p) => p.loss));
  if (hi - lo < 1e-6) { lo -= 0.05; hi += 0.05; }
  const ys = roundStep(lo, hi, 4), xs = roundStep(0, maxStep, 5);
  const ylo = Math.floor(lo / ys.step + 1e-9) * ys.step, yhi = Math.ceil(hi / ys.step - 1e-9) * ys.step;
  const x = (v) => L + ((W - L - R) * v) / maxStep;
  const y = (l) => T + ((H - B - T) * (yhi - l)) / (yhi - ylo);
  const text = (t, attrs) => { const e = svg("text", attrs); e.textContent = t; return e; };
  for (let i = 0; ylo + i * ys.step <= yhi + ys.step * 1e-6; ++i) {
    const v = ylo + i * ys.step;
    root.append(svg("line", { class: "grid", x1: L, y1: y(v), x2: W - R, y2: y(v) }),
                text(v.toFixed(ys.decimals), { class: "y-tick", x: L - 6, y: y(v) + 4, "text-anchor": "end" }));
  }
  for (let v = 0; v <= maxStep + xs.step * 1e-6; v += xs.step) {
    root.append(svg("line", { class: "axis", x1: x(v), y1: H - B, x2: x(v), y2: H - B + 5 }),
                text(v.toFixed(xs.decimals), { class: "x-tick", x: x(v), y: H - B + 18, "text-anchor": "middle" }));
  }
  root.append(text("step", { class: "axis-title", x: W - R, y: H - 2, "text-anchor": "end" }));
  root.append(svg("polyline", { points: finite.map((p) => `${x(p.step).toFixed(1)},${y(p.loss).toFixed(1)}`).join(" ") }));
  return root;
}

// Loss against step for one run, as an SVG polyline.
function curveSvg(run, points) {
  const W = 320, H = 160, P = 28;
  const finite = points.filter((p) => p.loss !== null);
  const root = svg("svg", { width: W, height: H, class: "live-curve", "data-run": run.id,
                            "data-points": finite.length, viewBox: `0 0 ${W} ${H}` });
  root.append(svg("line", { class: "axis", x1: P, y1: H - P, x2: W - 4, y2: H - P }),
              svg("line", { class: "axis", x1: P, y1: 4, x2: P, y2: H - P }));
  if (finite.length > 0) {
    const maxStep = Math.max(run.progress.total_steps || 0, ...finite.map((p) => p.step), 1);
    const lo = Math.min(...finite.map((p) => p.loss)), hi = Math.max(...finite.map((p) => p.loss));
    const span = hi - lo || 1;
    const x = (s) => P + ((W - P - 6) * s) / maxStep;
    const y = (l) => 6 + ((H - P - 10) * (hi - l)) / span;
    root.append(svg("polyline", { points: finite.map((p) => `${x(p.step).toFixed(1)},${y(p.loss).toFixed(1)}`).join(" ") }));
    const label = (text, xx, yy) => { const t = svg("text", { x: xx, y: yy }); t.textContent = text; return t; };
    root.append(label(hi.toFixed(3), 0, 12), label(lo.toFixed(3), 0, H - P), label(`step ${maxStep}`, W - 60, H - 8));
  }
  return root;
}

async function loadCurve(runId) {
  const have = curves.get(runId) || [];
  const after = have.length ? have[have.length - 1].step : -1;
  const data = await api(`/api/runs/${runId}?after_step=${after}`);
  // A new attempt starts its curve over.
  let points = have.length && data.points.length && data.points[0].attempt !== have[0].attempt ? [] : have;
  points = points.concat(data.points);
  curves.set(runId, points);
  return { run: data.run, points };
}

// A mixture of experts' routing balance at its last progress step (the
// worst MoE layer's max/mean tokens per expert); nothing for a dense run.
function expertLoad(run, prefix) {
  const load = run.progress.max_over_mean_load;
  return load > 0 ? h("span", { class: "expert-load", title: "max/mean tokens per expert, worst MoE layer" },
    `${prefix}load ${load.toFixed(2)}×`) : null;
}

function runsTable(runs) {
  return h("table", { id: "runs" },
    h("tr", {}, ["run", "variant", "seed", "status", "attempt", "step", "loss", "tokens/s", "worker", "val nats/byte", "failure", ""]
      .map((t) => h("th", {}, t))),
    runs.map((r) => h("tr", { "data-run": r.id },
      h("td", {}, h("a", { href: `#/runs/${r.id}` }, r.id)),
      h("td", {}, r.variant, r.variant_kind === "reference" ? h("span", { class: "muted" }, " (reference)") : null),
      h("td", { class: "num" }, r.seed),
      h("td", {}, statusBadge(r.status)),
      h("td", { class: "num" }, r.attempt),
      h("td", { class: "num" }, `${r.progress.step}/${r.progress.total_steps || "?"}`, expertLoad(r, " · ")),
      h("td", { class: "num" }, fmt(r.progress.loss)),
      h("td", { class: "num" }, fmt(r.progress.tokens_per_s, 0)),
      h("td", {}, r.worker ? `${r.worker} ${r.device}` : ""),
      h("td", { class: "num" }, r.result ? fmt(r.result.val_nats_per_byte) : "—"),
      h("td", { class: "error" }, r.last_failure ? `${r.last_failure}: ${r.last_error}` : ""),
      h("td", {}, r.status === "queued" || r.status === "leased" ? actionButton("Cancel", `/api/runs/${r.id}/cancel`)
                : r.status === "failed" || r.status === "cancelled" ? actionButton("Retry", `/api/runs/${r.id}/retry`) : null))));
}

async function experimentPage(mine, key) {
  const render = async () => {
    const data = await api(`/api/experiments/${encodeURIComponent(key)}`);
    const running = data.runs.filter((r) => r.status === "leased");
    const live = await Promise.all(running.map((r) => loadCurve(r.id)));
    if (mine !== generation) return data;
    const e = data.experiment, c = e.counts;
    mount(
      h("h1", { id: "experiment-name" }, e.name),
      h("p", {}, ["queued", "leased", "succeeded", "failed", "cancelled"].filter((s) => c[s] > 0)
        .map((s) => h("span", { class: `badge s-${s}` }, `${c[s]} ${s}`)),
        ` ${c.total} runs · ${e.steps_done}/${e.steps_total} steps · ETA ${c.queued + c.leased > 0 ? duration(e.eta_s) : "done"}`),
      h("div", { class: "actions" },
        actionButton("Cancel", `/api/experiments/${e.id}/cancel`, `Cancel every queued and running run of ${e.name}?`),
        actionButton("Retry", `/api/experiments/${e.id}/retry`)),
      reportSection(data),
      h("h2", {}, "Running"),
      live.length ? h("div", { class: "curves", id: "live-curves" }, live.map(({ run, points }) =>
        h("div", { class: "curve" }, h("div", {}, h("a", { href: `#/runs/${run.id}` }, `${run.variant} seed ${run.seed}`),
          ` · step ${run.progress.step}`, expertLoad(run, " · ")), curveSvg(run, points))))
        : h("p", { class: "muted" }, "No run is training now."),
      h("h2", {}, "Runs"), runsTable(data.runs));
    return data;
  };
  const data = await render();
  follow(mine, data.changes, render);
}

// ---- one run ---------------------------------------------------------------

async function runPage(mine, id) {
  const render = async () => {
    curves.delete(Number(id));
    const { run, points } = await loadCurve(Number(id));
    const data = await api(`/api/runs/${id}?after_step=${points.length ? points[points.length - 1].step : -1}`);
    if (mine !== generation) return data;
    mount(
      h("h1", {}, `Run ${run.id}: ${run.variant} seed ${run.seed}`),
      h("p", {}, statusBadge(run.status), ` attempt ${run.attempt} · budget ${run.budget} · experiment `,
        h("a", { href: `#/experiments/${data.experiment.id}` }, data.experiment.name)),
      data.diverged_step !== null ? h("p", { class: "error", id: "diverged" }, `Diverged at step ${data.diverged_step}`) : null,
      run.progress.max_over_mean_load > 0
        ? h("p", { id: "expert-load", title: "max tokens on one expert / mean tokens per expert, worst MoE layer; 1 = perfectly even" },
            `max/mean load ${run.progress.max_over_mean_load.toFixed(2)}× at step ${run.progress.step}`)
        : null,
      h("div", { class: "actions" },
        run.status === "queued" || run.status === "leased" ? actionButton("Cancel", `/api/runs/${run.id}/cancel`) : null,
        run.status === "failed" || run.status === "cancelled" ? actionButton("Retry", `/api/runs/${run.id}/retry`) : null),
      h("h2", {}, "Training loss"), h("div", { class: "curve run" }, runCurveSvg(run, points)),
      run.result ? [h("h2", {}, "Result"), h("pre", { id: "result" }, JSON.stringify(run.result, null, 2))] : null,
      h("h2", {}, "Attempts"),
      h("table", { id: "attempts" },
        h("tr", {}, ["attempt", "worker", "device", "started", "ended", "outcome", "message (stderr tail)"].map((t) => h("th", {}, t))),
        data.attempts.map((a) => h("tr", {},
          h("td", { class: "num" }, a.attempt), h("td", {}, a.worker), h("td", {}, `${a.device} (${a.device_class})`),
          h("td", {}, when(a.started_unix_ms)), h("td", {}, when(a.ended_unix_ms)),
          h("td", {}, a.outcome || "running"), h("td", {}, a.message ? h("pre", {}, a.message) : "")))),
      h("h2", {}, "Spec"), h("pre", { id: "spec" }, JSON.stringify(data.spec, null, 2)));
    return data;
  };
  const data = await render();
  follow(mine, data.changes, render);
}

// ---- workers ---------------------------------------------------------------

async function workersPage(mine) {
  const render = async () => {
    const data = await api("/api/workers");
    if (mine !== generation) return data;
    mount(h("h1", {}, "Workers"),
      data.workers.length === 0 ? h("p", { class: "muted" }, "No worker has registered.")
        : h("table", { id: "workers" },
            h("tr", {}, ["worker", "host", "devices", "last seen", "runs"].map((t) => h("th", {}, t))),
            data.workers.map((w) => h("tr", {},
              h("td", {}, w.id), h("td", {}, w.hostname),
              h("td", {}, w.devices.map((d) => h("div", {}, `${d.name} (${d.device_class})`))),
              h("td", {}, ago(w.last_seen_unix_ms, data.now_unix_ms)),
              h("td", {}, w.leased_run_ids.map((id) => h("a", { href: `#/runs/${id}` }, `${id} `)))))));
    const changes = await api("/api/changes");
    return changes;
  };
  const data = await render();
  follow(mine, data.changes, render);
}

// ---- routing ---------------------------------------------------------------

async function route() {
  const mine = ++generation;
  curves.clear();
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  try {
    if (parts[0] === "experiments" && parts[1]) await experimentPage(mine, decodeURIComponent(parts[1]));
    else if (parts[0] === "runs" && parts[1]) await runPage(mine, parts[1]);
    else if (parts[0] === "workers") await workersPage(mine);
    else await experimentsPage(mine);
  } catch (e) {
    if (mine === generation) mount(h("p", { class: "error", id: "error" }, e.message));
  }
}

async function start() {
  try { session = await api("/api/session"); } catch (e) { /* shown by the page */ }
  const s = document.getElementById("session");
  if (session.token_required) {
    s.append(session.can_act ? "logged in · " : "read-only · ",
             h("form", { method: "post", action: "/logout", style: "display:inline" }, h("button", { type: "submit" }, "Log out")));
  } else {
    s.textContent = "read-only (no client token)";
  }
  window.addEventListener("hashchange", route);
  route();
}

start();
