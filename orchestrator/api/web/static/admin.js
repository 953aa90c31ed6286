// The admin view (admin keys): tracked sandboxes with stop and remove, runner images and runners,
// and the audit log. Refreshed every few seconds while shown.

import { h, clear, duration, bytes, ago } from "./dom.js";
import { get, post, del, postStream } from "./api.js";

const REFRESH_MS = 5000;

function table(label, columns, body) {
  return h("div", { class: "table-wrap" }, h("table", { class: "list", "aria-label": label },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))), body));
}

export function adminPage(main, { notice }) {
  const boxes = h("tbody");
  const images = h("tbody");
  const runners = h("tbody");
  const audit = h("tbody");
  const status = h("p", { class: "status-line", role: "status", "aria-live": "polite" });
  const buildLog = h("pre", { class: "build-log", id: "build-log", "aria-live": "polite", "aria-label": "Image build progress", hidden: true });
  let building = false;

  async function build(runner) {
    if (building) return;
    building = true;
    buildLog.hidden = false;
    buildLog.textContent = `build ${runner}\n`;
    try {
      await postStream("/v1/admin/images/build", { runner, force: false }, (phase, data) => {
        const message = data && typeof data === "object" ? data.message || data.tag || "" : String(data);
        buildLog.append(`${phase}: ${message}\n`);
        buildLog.dataset.phase = phase;
        buildLog.scrollTop = buildLog.scrollHeight;
      });
    } catch (err) {
      buildLog.append(`error: ${err.message}\n`);
      buildLog.dataset.phase = "error";
    } finally {
      building = false;
      refresh();
    }
  }
  main.append(
    h("h1", {}, "Admin"), status,
    h("section", { "aria-labelledby": "boxes-title" }, h("h2", { id: "boxes-title" }, "Sandboxes"),
      table("Sandboxes", ["Name", "Owner", "Assistant", "Lifecycle", "Status", "Idle", "Age", "Memory", ""], boxes)),
    h("section", { "aria-labelledby": "images-title" }, h("h2", { id: "images-title" }, "Images"),
      table("Runner images", ["Tag", "Runner", "CLI", "Size", "Created"], images),
      table("Runners", ["Runner", "CLI version", "Available", ""], runners), buildLog),
    h("section", { "aria-labelledby": "audit-title" }, h("h2", { id: "audit-title" }, "Audit log"),
      table("Audit log", ["When", "Actor", "Action", "Target"], audit)));

  async function act(label, fn) {
    status.textContent = `${label}…`;
    try {
      await fn();
      status.textContent = `${label}: done.`;
    } catch (err) {
      status.textContent = `${label}: ${err.message}`;
    }
    refresh();
  }

  function fill(body, rows, empty, columns) {
    clear(body);
    if (!rows.length) body.append(h("tr", {}, h("td", { colspan: columns, class: "meta" }, empty)));
    body.append(...rows);
  }

  let timer = 0;
  let stopped = false;
  async function refresh() {
    clearTimeout(timer);
    try {
      const [sandboxes, imageList, runnerList, records] = await Promise.all([
        get("/v1/admin/sandboxes?usage=true"),
        get("/v1/admin/images"),
        get("/v1/admin/runners").catch(() => []),
        get("/v1/admin/audit?limit=50"),
      ]);
      if (stopped) return;
      fill(boxes, sandboxes.map((b) => {
        const name = encodeURIComponent(b.name);
        return h("tr", { dataset: { sandbox: b.name } },
          h("td", {}, h("code", {}, b.name)), h("td", {}, b.owner), h("td", {}, b.assistant_id),
          h("td", {}, b.lifecycle), h("td", {}, h("span", { class: `badge ${b.status}` }, b.status)),
          h("td", { class: "nowrap" }, duration(b.idle_seconds * 1000)), h("td", { class: "nowrap" }, duration(b.age_seconds * 1000)),
          h("td", { class: "nowrap" }, b.usage?.memory_bytes !== undefined ? bytes(b.usage.memory_bytes) : ""),
          h("td", { class: "actions" },
            h("button", { type: "button", disabled: b.status === "stopped", "aria-label": `Stop ${b.name}`, onclick: () => act(`Stop ${b.name}`, () => post(`/v1/admin/sandboxes/${name}/stop`)) }, "Stop"),
            h("button", { type: "button", class: "danger", "aria-label": `Remove ${b.name}`, onclick: () => { if (confirm(`Remove sandbox ${b.name}?`)) act(`Remove ${b.name}`, () => del(`/v1/admin/sandboxes/${name}`)); } }, "Remove")));
      }), "No sandboxes.", 9);
      fill(images, imageList.map((i) => h("tr", {},
        h("td", {}, h("code", {}, i.tag)), h("td", {}, i.runner), h("td", {}, i.cli_version || ""),
        h("td", {}, bytes(i.size)), h("td", {}, h("time", { datetime: i.created }, ago(i.created))))), "No runner images: cage images build --all.", 5);
      fill(runners, runnerList.map((r) => h("tr", {},
        h("td", {}, r.name), h("td", {}, r.cli_version), h("td", {}, r.available ? "yes" : "no (build it)"),
        h("td", { class: "actions" }, h("button", { type: "button", "aria-label": `Build the ${r.name} image`, onclick: () => build(r.name) }, "Build")))), "No runners.", 4);
      fill(audit, records.map((r) => h("tr", {},
        h("td", {}, h("time", { datetime: r.ts, title: r.ts }, ago(r.ts))), h("td", {}, r.actor),
        h("td", {}, r.action), h("td", {}, h("code", {}, r.target)))), "Nothing audited yet.", 4);
    } catch (err) {
      notice(`Admin data not loaded: ${err.message}`);
    }
    if (!stopped) timer = setTimeout(refresh, REFRESH_MS);
  }
  refresh();
  return () => { stopped = true; clearTimeout(timer); };
}
