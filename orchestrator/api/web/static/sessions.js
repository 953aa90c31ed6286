// The caller's sessions (most recently active first), refreshed every few seconds while shown,
// and the form that starts a new session with any assistant the key may use.

import { h, clear, ago } from "./dom.js";
import { get } from "./api.js";

const REFRESH_MS = 3000;

export function sessionsPage(main, { notice }) {
  const rows = h("tbody");
  const table = h("table", { class: "list", "aria-label": "Your sessions" },
    h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "Session"), h("th", { scope: "col" }, "Assistant"),
      h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Last activity"),
      h("th", { scope: "col" }, "Running turn"))),
    rows);
  const empty = h("p", { class: "help", hidden: true }, "No sessions yet: start one below.");
  const updated = h("p", { class: "meta", "aria-live": "off" });

  const assistant = h("select", { id: "new-assistant", name: "assistant", required: true });
  const sessionId = h("input", { id: "new-session", name: "session", pattern: "[A-Za-z0-9_\\-][A-Za-z0-9_.\\-]{0,63}", placeholder: "generated if empty", autocomplete: "off" });
  const form = h("form", { class: "new-session", "aria-labelledby": "new-title" },
    h("h2", { id: "new-title" }, "Start a session"),
    h("div", { class: "field" }, h("label", { for: "new-assistant" }, "Assistant"), assistant),
    h("div", { class: "field" }, h("label", { for: "new-session" }, "Session id"), sessionId),
    h("button", { type: "submit" }, "Start"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = sessionId.value.trim() || `web-${crypto.randomUUID().slice(0, 8)}`;
    location.hash = `#/s/${encodeURIComponent(id)}?assistant=${encodeURIComponent(assistant.value)}`;
  });

  main.append(h("h1", {}, "Sessions"), updated, h("div", { class: "table-wrap" }, table), empty, form);

  get("/v1/models").then((models) => {
    clear(assistant);
    for (const m of models.data ?? []) assistant.append(h("option", { value: m.id }, m.id));
    if (!assistant.options.length) assistant.append(h("option", { value: "", disabled: true }, "no assistant available"));
  }).catch((err) => notice(`Assistants not listed: ${err.message}`));

  let timer = 0;
  let stopped = false;
  async function refresh() {
    try {
      const sessions = await get("/v1/sessions?limit=100");
      if (stopped) return;
      clear(rows);
      for (const s of sessions) {
        const href = `#/s/${encodeURIComponent(s.id)}`;
        rows.append(h("tr", { dataset: { sessionId: s.id } },
          h("td", {}, h("a", { href }, s.title || s.id), s.title && s.title !== s.id ? h("span", { class: "meta" }, ` ${s.id}`) : null),
          h("td", {}, s.assistant_id),
          h("td", {}, h("span", { class: `badge ${s.running_turn_id ? "running" : "idle"}` }, s.running_turn_id ? "running" : "idle")),
          h("td", {}, h("time", { datetime: s.updated_at, title: s.updated_at }, ago(s.updated_at))),
          h("td", {}, s.running_turn_id ? h("code", {}, s.running_turn_id) : "—")));
      }
      empty.hidden = sessions.length > 0;
      updated.textContent = `Updated ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      notice(`Sessions not listed: ${err.message}`);
    }
    if (!stopped) timer = setTimeout(refresh, REFRESH_MS);
  }
  refresh();
  return () => { stopped = true; clearTimeout(timer); };
}
