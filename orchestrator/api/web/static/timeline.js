// A session's turn timeline, rebuilt from protocol events (docs/protocol.md). Events are applied
// in `seq` order exactly once: one already applied is dropped (a replay overlapping what was
// seen), and a gap is reported so the socket can resume from the last seq applied. Messages are
// windows keyed by turn and message_id, reassembled by `delta_action` (append, merge, replace);
// `message_end.content` is authoritative when it arrives. Unknown types and events are ignored.

import { h, clear, duration } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const TOOL_TYPES = new Set(["execute", "agent", "todo", "plan", "job", "question"]);
const HEAD_LINES = 12;
const TAIL_LINES = 12;

export class Timeline {
  /**
   * @param {HTMLElement} root where the turns go
   * @param {{onGap: (lastSeq: number) => void, onPermission: (requestId: string, decision: string) => void,
   *          onQuestion: (requestId: string, answer: string) => void,
   *          userText: (turnId: string) => string | undefined}} hooks
   */
  constructor(root, hooks) {
    this.root = root;
    this.hooks = hooks;
    this.lastSeq = 0;
    this.turns = new Map();
    this.messages = new Map();
    this.pending = new Set();
    this.frame = 0;
  }

  /** Apply one event; false when it was a duplicate or came after a gap (not applied). */
  apply(event) {
    if (typeof event.seq !== "number") return false;
    if (event.seq <= this.lastSeq) return false;
    if (event.seq !== this.lastSeq + 1) {
      this.hooks.onGap(this.lastSeq);
      return false;
    }
    this.lastSeq = event.seq;
    this.root.dataset.lastSeq = String(event.seq);
    try {
      this.dispatch(event);
    } catch (err) {
      console.error("event not rendered", event.seq, err);
    }
    return true;
  }

  dispatch(event) {
    const props = event.props ?? {};
    if (event.type === "event") {
      this.lifecycle(event, props);
    } else if (event.type === "error" && !event.message_id) {
      const turn = this.turn(event);
      turn.lastError = String(props.message ?? "");
      turn.body.append(errorBox(props.message, props.code));
    } else if (event.message_id) {
      this.delta(event, props);
    } else if (event.type === "text" || event.type === "thinking") {
      this.delta({ ...event, message_id: `seq-${event.seq}`, delta_action: "append" }, props);
    }
  }

  turn(event) {
    let turn = this.turns.get(event.turn_id);
    if (!turn) {
      const status = h("span", { class: "badge running" }, "running");
      const meta = h("span", { class: "meta" });
      const sandbox = h("p", { class: "sandbox", hidden: true });
      const body = h("div", { class: "turn-body" });
      const footer = h("footer", { class: "turn-footer" });
      const el = h("article", { class: "turn", dataset: { turnId: event.turn_id }, "aria-label": "turn" },
        h("header", { class: "turn-head" }, status, meta), sandbox, body, footer);
      turn = { id: event.turn_id, el, status, meta, sandbox, body, footer, usage: null, cost: null, started: event.ts };
      this.turns.set(event.turn_id, turn);
      this.root.append(el);
      const said = this.hooks.userText(event.turn_id);
      if (said) this.userSaid(event.turn_id, said);
    }
    return turn;
  }

  /** Show what the user sent for a turn (it is not in the event log), once, at the turn's top. */
  userSaid(turnId, text) {
    const turn = this.turns.get(turnId);
    if (!turn || turn.body.querySelector(".user-message")) return;
    turn.body.prepend(h("div", { class: "user-message" }, h("span", { class: "who" }, "You"), renderMarkdown(text)));
  }

  lifecycle(event, props) {
    const nested = Boolean(event.thread_id);
    switch (props.event) {
      case "stream_start": {
        const turn = this.turn(event);
        if (nested) {
          turn.body.append(h("p", { class: "note" }, `nested call: ${props.assistant_name || props.assistant_id || ""}`));
        } else {
          clear(turn.meta).append(
            h("strong", {}, props.assistant_name || props.assistant_id || ""),
            props.runner ? ` · ${props.runner}` : "",
            ` · ${new Date(event.ts).toLocaleTimeString()}`,
          );
        }
        break;
      }
      case "stream_end": {
        const turn = this.turn(event);
        if (nested) break;
        const status = props.status || "completed";
        turn.status.className = `badge ${status}`;
        turn.status.textContent = status;
        turn.el.dataset.status = status;
        if (props.error && props.error !== turn.lastError) turn.body.append(errorBox(props.error, "turn"));
        if (props.usage) turn.usage = props.usage;
        this.footer(turn, props.duration_ms);
        break;
      }
      case "message_start": {
        const msg = this.message(event, props.type);
        msg.status = "running";
        break;
      }
      case "message_end": {
        const msg = this.message(event, props.type);
        msg.status = props.status || "completed";
        msg.duration = Math.max(props.duration_ms ?? 0, (event.ts ?? 0) - (msg.started ?? event.ts ?? 0));
        if (typeof props.content === "string") msg.content = props.content;
        else if (props.content && typeof props.content === "object") msg.props = { ...msg.props, ...props.content };
        this.schedule(msg);
        break;
      }
      case "token/usage":
        if (props.usage && props.usage.scope !== "step") {
          const turn = this.turn(event);
          turn.usage = props.usage;
          this.footer(turn);
        }
        break;
      case "result/summary": {
        const turn = this.turn(event);
        if (typeof props.cost_usd === "number") turn.cost = props.cost_usd;
        if (props.usage && !turn.usage) turn.usage = props.usage;
        this.footer(turn);
        break;
      }
      case "sandbox/status": {
        const turn = this.turn(event);
        turn.sandbox.hidden = false;
        turn.sandbox.dataset.phase = props.phase || "";
        clear(turn.sandbox).append("Sandbox: ", h("span", { class: `phase ${props.phase}` }, props.phase || "?"),
          props.message ? ` — ${props.message}` : "");
        break;
      }
      case "sandbox/egress_denied":
        this.turn(event).body.append(h("p", { class: "note warn" },
          `Egress refused: ${props.method || ""} ${props.host}:${props.port ?? ""}`.trim()));
        break;
      case "turn/stalled":
        this.turn(event).body.append(h("p", { class: "note warn" },
          props.message || `no output for ${duration(props.idle_ms)}`));
        break;
      case "permission/request":
        this.turn(event).body.append(this.permission(props));
        break;
      case "permission/resolved": {
        const card = this.card(props.request_id);
        if (card) settle(card, resolution(props));
        else if (props.decision === "deny") {  // denied by a rule: no request came before it
          this.turn(event).body.append(h("p", { class: "note warn", dataset: { requestId: props.request_id } },
            `Refused by ${props.rule ? `rule ${props.rule}` : "the policy"}: ${props.tool || "tool"}`));
        }
        break;
      }
      case "question":
        this.turn(event).body.append(this.question(props));
        break;
      case "question/answered": {
        const card = this.card(props.request_id);
        if (card) settle(card, props.by === "user" ? `answered: ${props.answer}` : `no answer (${props.by})`);
        break;
      }
      default:
        break;
    }
  }

  card(requestId) {
    return this.root.querySelector(`.card[data-request-id="${CSS.escape(String(requestId))}"]`);
  }

  /** A request card: what the agent wants to run, until when, and the three answers. */
  permission(props) {
    const decide = (decision) => () => this.hooks.onPermission(props.request_id, decision);
    const id = `perm-${props.request_id}`;
    return h("section", { class: "card permission", dataset: { requestId: props.request_id }, role: "group", "aria-labelledby": `${id}-title` },
      h("header", {}, h("strong", { id: `${id}-title` }, `Permission: ${props.tool || "tool"}`), " ",
        h("span", { class: "decision", role: "status" }, "waiting")),
      props.reason ? h("p", {}, props.reason) : null,
      props.rule ? h("p", { class: "meta" }, `Asked by rule: ${props.rule}`) : null,
      props.input ? h("pre", {}, JSON.stringify(props.input, null, 2)) : null,
      deadline(props.deadline),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "allow", onclick: decide("allow") }, "Allow"),
        h("button", { type: "button", class: "allow-always", title: "Allow this call for the rest of the session", onclick: decide("allow_always") }, "Allow always"),
        h("button", { type: "button", class: "danger", onclick: decide("deny") }, "Deny")));
  }

  /** A question card: the agent's options as buttons, or a free-text answer. */
  question(props) {
    const answer = (text) => this.hooks.onQuestion(props.request_id, text);
    const id = `q-${props.request_id}`;
    const field = h("input", { id: `${id}-answer`, name: "answer", type: "text", autocomplete: "off" });
    const form = h("form", { class: "answer", "aria-label": "Answer the question" },
      h("label", { for: `${id}-answer` }, "Your answer"), field,
      h("button", { type: "submit" }, "Answer"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (field.value.trim()) answer(field.value.trim());
      else field.focus();
    });
    const options = (props.options ?? []).map((option) => h("button", { type: "button", class: "option", onclick: () => answer(String(option)) }, String(option)));
    return h("section", { class: "card question-card", dataset: { requestId: props.request_id }, role: "group", "aria-labelledby": `${id}-title` },
      h("header", {}, h("strong", { id: `${id}-title` }, "Question"), " ", h("span", { class: "decision", role: "status" }, "waiting")),
      h("p", { class: "question-text" }, String(props.text ?? "")),
      deadline(props.deadline),
      options.length ? h("div", { class: "actions" }, options) : null,
      form);
  }

  footer(turn, durationMs) {
    if (durationMs !== undefined) turn.duration = durationMs;
    const parts = [];
    if (turn.duration !== undefined) parts.push(duration(turn.duration));
    const u = turn.usage;
    if (u) {
      parts.push(`${u.input_tokens ?? 0} in${u.cached_input_tokens ? ` (${u.cached_input_tokens} cached)` : ""}`);
      parts.push(`${u.output_tokens ?? 0} out`);
    }
    const cost = turn.cost ?? u?.cost_usd;
    if (typeof cost === "number") parts.push(`$${cost.toFixed(4)}`);
    turn.footer.textContent = parts.join(" · ");
  }

  message(event, type) {
    const key = `${event.turn_id}/${event.props?.message_id ?? event.message_id}`;
    let msg = this.messages.get(key);
    if (!msg) {
      msg = { key, id: event.props?.message_id ?? event.message_id, type: type || event.type, content: "", props: {}, status: "running", started: event.ts, el: null };
      msg.el = shell(msg);
      this.messages.set(key, msg);
      this.turn(event).body.append(msg.el);
    }
    return msg;
  }

  delta(event, props) {
    const msg = this.message(event, event.type);
    const action = event.delta_action || (event.delta ? "append" : "replace");
    if (msg.type === "text" || msg.type === "thinking") {
      const text = typeof props.content === "string" ? props.content : "";
      msg.content = action === "append" ? msg.content + text : text;
    } else if (action === "replace") {
      msg.props = { ...props };
    } else if (action === "append" && typeof props.arguments === "string") {
      msg.props = { ...msg.props, ...props, arguments: (msg.props.arguments ?? "") + props.arguments };
    } else {
      const next = { ...msg.props, ...props };
      if (typeof props.input_delta === "string") next.input_delta = (msg.props.input_delta ?? "") + props.input_delta;
      msg.props = next;
    }
    msg.lastTs = event.ts;
    this.schedule(msg);
  }

  /** Re-render changed messages once per animation frame (deltas arrive faster than paint). */
  schedule(msg) {
    this.pending.add(msg);
    if (this.frame) return;
    const flush = () => {
      this.frame = 0;
      for (const m of this.pending) paint(m);
      this.pending.clear();
    };
    this.frame = document.hidden ? setTimeout(flush, 50) : requestAnimationFrame(flush);
  }

  /** Paint everything now (before a test or a screenshot reads the page). */
  flush() {
    for (const m of this.pending) paint(m);
    this.pending.clear();
  }
}

/** "allowed (by user)", "denied (by timeout): <message>", "allowed always (by user)". */
function resolution(props) {
  const verb = props.decision === "allow" ? (props.always ? "allowed always" : "allowed") : "denied";
  return `${verb} (by ${props.by || "?"})${props.decision === "deny" && props.message ? `: ${props.message}` : ""}`;
}

/** Disable the card's controls and show how it ended. */
function settle(card, text) {
  card.querySelectorAll("button, input").forEach((el) => { el.disabled = true; });
  card.dataset.resolved = "true";
  card.querySelector(".deadline")?.remove();
  card.querySelector(".decision").textContent = text;
}

function deadline(iso) {
  if (!iso) return null;
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return null;
  return h("p", { class: "meta deadline" }, "Decided by default at ", h("time", { datetime: iso }, at.toLocaleTimeString()), " if nobody answers");
}

function errorBox(message, code) {
  return h("div", { class: "error-box", role: "alert" }, h("strong", {}, code ? `Error (${code})` : "Error"), " ", String(message ?? ""));
}

function shell(msg) {
  if (msg.type === "text") return h("div", { class: "text", dataset: { messageId: msg.id } });
  if (msg.type === "thinking") {
    return h("details", { class: "thinking", dataset: { messageId: msg.id } }, h("summary", {}, "Thinking"), h("div", { class: "thinking-body" }));
  }
  if (msg.type === "loading") return h("p", { class: "loading", dataset: { messageId: msg.id }, "aria-live": "polite" });
  if (msg.type === "error") return h("div", { class: "error-box", role: "alert", dataset: { messageId: msg.id } });
  return h("section", { class: "card tool", dataset: { messageId: msg.id }, "aria-label": "tool run" });
}

function paint(msg) {
  const el = msg.el;
  el.dataset.status = msg.status;
  if (msg.type === "text") {
    clear(el).append(renderMarkdown(msg.content));
  } else if (msg.type === "thinking") {
    const body = el.querySelector(".thinking-body");
    clear(body).append(renderMarkdown(msg.content));
    el.querySelector("summary").textContent = msg.status === "running" ? "Thinking…" : "Thinking";
  } else if (msg.type === "loading") {
    el.textContent = msg.props.message || "";
    el.hidden = Boolean(msg.props.done) || msg.status !== "running";
  } else if (msg.type === "error") {
    clear(el).append(h("strong", {}, msg.props.code ? `Error (${msg.props.code})` : "Error"), " ", msg.props.message || msg.content || "");
  } else if (TOOL_TYPES.has(msg.type)) {
    paintTool(msg);
  } else if (msg.type === "tool_call") {
    paintToolCall(msg);
  }
}

function toolInput(props) {
  if (props.input && typeof props.input === "object") return props.input;
  if (typeof props.input_delta === "string") {
    try { return JSON.parse(props.input_delta); } catch { return partialInput(props.input_delta); }
  }
  return null;
}

/** The string fields of a tool input still streaming (`{"command": "ls -l`...), for the card. */
function partialInput(text) {
  const found = {};
  for (const m of text.matchAll(/"(command|file_path|path|pattern|url)"\s*:\s*"((?:[^"\\]|\\.)*)/g)) {
    try { found[m[1]] = JSON.parse(`"${m[2].replace(/\\$/, "")}"`); } catch { found[m[1]] = m[2]; }
  }
  return Object.keys(found).length ? found : null;
}

function statusOf(msg) {
  const p = msg.props;
  if (p.status) return p.is_error && p.status === "completed" ? "error" : p.status;
  return msg.status;
}

function paintTool(msg) {
  const p = msg.props;
  const input = toolInput(p);
  const status = statusOf(msg);
  const tool = p.tool || msg.type;
  const took = msg.duration ?? (status !== "running" && msg.lastTs ? msg.lastTs - msg.started : undefined);
  const head = h("header", {},
    h("span", { class: "tool-name" }, tool),
    h("span", { class: "tool-what" }, describeTool(tool, input, p)),
    h("span", { class: `badge ${status}` }, status),
    took !== undefined ? h("span", { class: "meta" }, duration(took)) : null,
    typeof p.exit_code === "number" ? h("span", { class: "meta" }, `exit ${p.exit_code}`) : null);
  const parts = [head];
  const diff = editDiff(tool, input);
  if (diff) parts.push(diff);
  else if (input && !commandOf(input)) parts.push(h("details", { class: "input" }, h("summary", {}, "Input"), h("pre", {}, JSON.stringify(input, null, 2))));
  else if (!input && p.input_delta) parts.push(h("pre", { class: "input" }, p.input_delta));
  if (typeof p.output === "string" && p.output) parts.push(output(p.output, p.is_error));
  else if (p.output && typeof p.output === "object") parts.push(output(JSON.stringify(p.output, null, 2), p.is_error));
  const open = msg.el.querySelector("details.input")?.open;
  clear(msg.el).append(...parts);
  if (open) msg.el.querySelector("details.input")?.setAttribute("open", "");
  msg.el.dataset.tool = tool;
  msg.el.dataset.status = status;
}

function commandOf(input) {
  if (!input) return "";
  if (typeof input.command === "string") return input.command;
  if (Array.isArray(input.command)) return input.command.join(" ");
  if (Array.isArray(input.argv)) return input.argv.join(" ");
  return "";
}

function describeTool(tool, input, props) {
  const command = commandOf(input);
  if (command) return h("code", { class: "command" }, command);
  const path = input && (input.file_path || input.path || input.filePath || input.pattern || input.url);
  if (path) return h("code", {}, String(path));
  return props.summary || "";
}

/** Edits as a diff: removed lines, then added ones (Edit, MultiEdit, Write, and the lowercase names). */
function editDiff(tool, input) {
  if (!input) return null;
  const name = String(tool).toLowerCase();
  const pairs = [];
  if (typeof input.old_string === "string" || typeof input.oldString === "string") {
    pairs.push([input.old_string ?? input.oldString, input.new_string ?? input.newString ?? ""]);
  } else if (Array.isArray(input.edits)) {
    for (const e of input.edits) pairs.push([e.old_string ?? e.oldString ?? "", e.new_string ?? e.newString ?? ""]);
  } else if ((name === "write" || name === "create") && typeof input.content === "string") {
    pairs.push(["", input.content]);
  } else if (typeof input.patch === "string" || typeof input.diff === "string") {
    const text = input.patch ?? input.diff;
    return h("pre", { class: "diff" }, text.split("\n").map((line) =>
      h("span", { class: line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx" }, `${line}\n`)));
  }
  if (!pairs.length) return null;
  const rows = [];
  for (const [before, after] of pairs) {
    const lines = (text) => (text ? text.replace(/\n$/, "").split("\n") : []);
    for (const line of lines(before)) rows.push(h("span", { class: "del" }, `- ${line}\n`));
    for (const line of lines(after)) rows.push(h("span", { class: "add" }, `+ ${line}\n`));
  }
  return h("pre", { class: "diff", "aria-label": "changes" }, rows);
}

/** Output with its head and tail kept; the middle behind a "show all" toggle. */
function output(text, isError) {
  const lines = text.replace(/\n$/, "").split("\n");
  const cls = isError ? "output is-error" : "output";
  if (lines.length <= HEAD_LINES + TAIL_LINES + 5) return h("pre", { class: cls }, lines.join("\n"));
  const hidden = lines.length - HEAD_LINES - TAIL_LINES;
  const pre = h("pre", { class: cls },
    lines.slice(0, HEAD_LINES).join("\n"), "\n",
    h("span", { class: "elided" }, `… ${hidden} lines not shown …`), "\n",
    lines.slice(-TAIL_LINES).join("\n"));
  const toggle = h("button", { type: "button", class: "link", onclick: () => { pre.textContent = lines.join("\n"); toggle.remove(); } }, `Show all ${lines.length} lines`);
  return h("div", {}, pre, toggle);
}

function paintToolCall(msg) {
  const p = msg.props;
  clear(msg.el).append(
    h("header", {}, h("span", { class: "tool-name" }, p.name || "tool call"),
      h("span", { class: `badge ${msg.status}` }, msg.status)),
    p.arguments ? h("pre", { class: "input" }, p.arguments) : null);
}
