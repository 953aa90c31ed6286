// One session: the turn timeline (replayed from the durable log, then live) and the steering
// controls (send a message with attachments, interrupt, cancel). The user's own messages are not
// in the event log, so this tab remembers what it sent per turn (sessionStorage) to show them.

import { h, clear } from "./dom.js";
import { get } from "./api.js";
import { Timeline } from "./timeline.js";
import { SessionConnection } from "./socket.js";

const MAX_ATTACHMENT_BYTES = 12 * 1024 * 1024; // base64 grows it by 4/3, under the 16 MiB body limit

function said(sessionId) {
  const key = `cage.said.${sessionId}`;
  let map = {};
  try { map = JSON.parse(sessionStorage.getItem(key) || "{}"); } catch { map = {}; }
  return {
    get: (turnId) => map[turnId],
    set: (turnId, text) => { map[turnId] = text; sessionStorage.setItem(key, JSON.stringify(map)); },
  };
}

function readFile(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ""));
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

export function sessionPage(main, { sessionId, assistantId, notice }) {
  const memory = said(sessionId);
  const sent = new Map(); // client_id -> text, until session.accepted names the turn
  const state = h("span", { class: "conn", role: "status", "aria-live": "polite" }, "connecting");
  const assistantLabel = h("span", { class: "meta" }, assistantId || "");
  const turnState = h("span", { class: "badge idle", id: "turn-state" }, "idle");
  const log = h("div", { class: "timeline", id: "timeline", role: "log", "aria-live": "off", "aria-label": "Turn timeline" });
  const status = h("p", { class: "status-line", role: "status", "aria-live": "polite" });

  const text = h("textarea", { id: "message", name: "message", rows: 3, placeholder: "Ask the assistant… (Ctrl+Enter sends)", required: true });
  const files = h("input", { id: "attachments", name: "attachments", type: "file", multiple: true });
  const sendButton = h("button", { type: "submit", id: "send" }, "Send");
  const interruptButton = h("button", { type: "button", id: "interrupt", disabled: true, title: "Stop the turn gracefully; the session and its sandbox stay" }, "Interrupt");
  const cancelButton = h("button", { type: "button", id: "cancel", class: "danger", disabled: true, title: "Kill the turn at once" }, "Cancel");
  const composer = h("form", { class: "composer", "aria-label": "Send a message" },
    h("label", { for: "message", class: "sr-only" }, "Message"), text,
    h("div", { class: "composer-row" },
      h("label", { for: "attachments", class: "file-label" }, "Attachments"), files,
      h("span", { class: "spacer" }), sendButton, interruptButton, cancelButton));

  main.append(
    h("div", { class: "session-head" },
      h("h1", {}, sessionId), assistantLabel, turnState, state),
    log, status, composer);

  let running = null;
  function setRunning(turnId) {
    running = turnId;
    turnState.className = `badge ${turnId ? "running" : "idle"}`;
    turnState.textContent = turnId ? "running" : "idle";
    interruptButton.disabled = cancelButton.disabled = !turnId;
    sendButton.disabled = Boolean(turnId);
  }

  const timeline = new Timeline(log, {
    onGap: (lastSeq) => connection.resume(lastSeq),
    onPermission: (requestId, decision) => {
      if (!connection.send({ type: "permission_response", request_id: requestId, decision })) status.textContent = "Not connected.";
    },
    onQuestion: (requestId, answer) => {
      if (!connection.send({ type: "question_response", request_id: requestId, answer })) status.textContent = "Not connected.";
    },
    userText: (turnId) => memory.get(turnId),
  });

  const connection = new SessionConnection(sessionId, assistantId, {
    lastSeq: () => timeline.lastSeq,
    onState: (s, detail) => {
      state.textContent = s;
      state.dataset.state = s;
      if (detail) status.textContent = detail;
      else if (s === "live") status.textContent = "";
    },
    onEvent: (event) => {
      const root = document.scrollingElement || document.documentElement;
      const atBottom = root.scrollHeight - root.scrollTop - root.clientHeight < 120;
      if (!timeline.apply(event)) return;
      if (event.type === "event" && !event.thread_id) {
        if (event.props?.event === "stream_start") setRunning(event.turn_id);
        if (event.props?.event === "stream_end" && running === event.turn_id) {
          setRunning(null);
          status.textContent = `Turn ${event.props.status}.`;
        }
      }
      if (atBottom) requestAnimationFrame(() => { root.scrollTop = root.scrollHeight; });
    },
    onControl: (frame) => {
      switch (frame.type) {
        case "session.ready":
          assistantLabel.textContent = frame.assistant_id;
          if (frame.running_turn_id) setRunning(frame.running_turn_id);
          break;
        case "session.accepted": {
          const textSent = sent.get(frame.client_id);
          if (textSent !== undefined) {
            memory.set(frame.turn_id, textSent);
            sent.delete(frame.client_id);
            timeline.userSaid(frame.turn_id, textSent);
          }
          setRunning(frame.turn_id);
          break;
        }
        case "session.interrupting":
          status.textContent = frame.force ? "Cancelling the turn…" : "Interrupting the turn…";
          break;
        case "session.error":
          status.textContent = `${frame.code}: ${frame.message}`;
          break;
        default:
          break;
      }
    },
  });
  connection.open();
  window.cage = { reconnect: () => connection.drop(), lastSeq: () => timeline.lastSeq };

  async function send() {
    const value = text.value.trim();
    if (!value) { text.focus(); return; }
    const attachments = [];
    let total = 0;
    for (const file of files.files) {
      total += file.size;
      if (total > MAX_ATTACHMENT_BYTES) { status.textContent = `Attachments over ${MAX_ATTACHMENT_BYTES / 1048576} MiB in all.`; return; }
      attachments.push({ name: file.name, content_base64: await readFile(file), media_type: file.type || "application/octet-stream" });
    }
    const clientId = crypto.randomUUID();
    if (!connection.send({ type: "user_message", text: value, attachments, client_id: clientId })) {
      status.textContent = "Not connected; the message was not sent.";
      return;
    }
    const names = attachments.map((a) => `\`${a.name}\``);
    sent.set(clientId, names.length ? `${value}\n\nAttachments: ${names.join(", ")}` : value);
    text.value = "";
    files.value = "";
    status.textContent = "Sent.";
  }

  composer.addEventListener("submit", (event) => { event.preventDefault(); send(); });
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); send(); }
  });
  interruptButton.addEventListener("click", () => connection.send({ type: "interrupt" }));
  cancelButton.addEventListener("click", () => connection.send({ type: "cancel" }));

  get(`/v1/sessions/${encodeURIComponent(sessionId)}`).catch((err) => {
    if (err.status === 404 && !assistantId) notice(`No session ${sessionId}: start one from the sessions page.`);
  });
  text.focus();
  return () => { connection.close(); clear(main); delete window.cage; };
}
