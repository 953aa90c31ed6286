// One session's websocket: a fresh single-use ticket for every connection (the key never goes in
// a URL), `after_seq` = the last seq the timeline applied, so a reconnect replays exactly what was
// missed from the durable log and then continues live. Reconnects back off up to 10 s; close codes
// 4401/4403/4404/4400 are final (retrying cannot help).

import { wsTicket } from "./api.js";

const FINAL = new Set([4400, 4401, 4403, 4404]);

export class SessionConnection {
  /**
   * @param {string} sessionId
   * @param {string | null} assistantId needed the first time (the session is created on first use)
   * @param {{lastSeq: () => number, onEvent: (e: object) => void, onControl: (f: object) => void,
   *          onState: (state: string, detail?: string) => void}} hooks
   */
  constructor(sessionId, assistantId, hooks) {
    this.sessionId = sessionId;
    this.assistantId = assistantId;
    this.hooks = hooks;
    this.ws = null;
    this.closed = false;
    this.retry = 0;
    this.timer = 0;
    this.resuming = false;
  }

  async open() {
    if (this.closed) return;
    this.hooks.onState("connecting");
    let ticket;
    try {
      ticket = await wsTicket();
    } catch (err) {
      this.hooks.onState(err.status === 401 ? "refused" : "offline", err.message);
      if (err.status !== 401) this.later();
      return;
    }
    if (this.closed) return;
    const params = new URLSearchParams({ ticket, after_seq: String(this.hooks.lastSeq()) });
    if (this.assistantId) params.set("assistant_id", this.assistantId);
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${scheme}//${location.host}/v1/sessions/${encodeURIComponent(this.sessionId)}/ws?${params}`);
    this.ws = ws;
    let refusal = "";
    ws.onmessage = (message) => {
      let frame;
      try { frame = JSON.parse(message.data); } catch { return; }
      if (typeof frame.type === "string" && frame.type.startsWith("session.")) {
        if (frame.type === "session.ready") {
          this.retry = 0;
          this.resuming = false;
          this.hooks.onState("live");
        }
        if (frame.type === "session.error") refusal = frame.message || frame.code;
        if (frame.type === "session.ack" && frame.of === "resume") this.resuming = false;
        this.hooks.onControl(frame);
      } else {
        this.hooks.onEvent(frame);
      }
    };
    ws.onclose = (close) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.closed) return;
      if (FINAL.has(close.code)) {
        this.hooks.onState("refused", refusal || `closed (${close.code})`);
        return;
      }
      this.hooks.onState("offline", "connection lost; reconnecting");
      this.later();
    };
  }

  later() {
    clearTimeout(this.timer);
    const wait = Math.min(10000, 500 * 2 ** this.retry);
    this.retry += 1;
    this.timer = setTimeout(() => this.open(), wait);
  }

  /** Send a client frame; false if the socket is not open. */
  send(frame) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  /** Ask the server to replay from `afterSeq` (a gap was seen); once until it acknowledges. */
  resume(afterSeq) {
    if (this.resuming) return;
    this.resuming = this.send({ type: "resume", after_seq: afterSeq });
  }

  /** Drop the connection as a network failure would (the reconnect resumes by seq). */
  drop() {
    if (this.ws) this.ws.close(4000, "client reconnect");
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close(1000, "page left");
    this.ws = null;
  }
}
