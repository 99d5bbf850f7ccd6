// One session WebSocket with automatic reconnection. Stream frames carry an offset;
// after a drop the socket reconnects and asks to resume after the last offset it saw,
// so nothing is shown twice and nothing is missed.

import { askToken, socketProtocols, socketUrl } from "./api.js";

const CLOSE_UNAUTHORIZED = 4401;
const CLOSE_FORBIDDEN = 4403;
const CLOSE_TOO_BIG = 1009; // a message over the server's frame limit: resending it would loop

export class SessionSocket {
  constructor(sessionId, { startCommand, onMessage, onControl, onState }) {
    this.sessionId = sessionId;
    this.startCommand = startCommand;
    this.onMessage = onMessage;
    this.onControl = onControl;
    this.onState = onState;
    this.lastOffset = -1;
    this.streamId = null;
    this.closedByUs = false;
    this.retries = 0;
    this.ws = null;
    this.firstMessage = "";
  }

  open(firstMessage = "") {
    this.firstMessage = firstMessage;
    this.connect();
  }

  connect() {
    this.onState("connecting");
    const ws = new WebSocket(socketUrl(this.sessionId), socketProtocols());
    this.ws = ws;
    ws.onopen = () => {
      this.retries = 0;
      const resume = this.lastOffset >= 0 ? this.lastOffset : null;
      ws.send(JSON.stringify(this.startCommand(this.firstMessage, resume, this.streamId)));
      this.firstMessage = "";
    };
    ws.onmessage = (event) => this.receive(JSON.parse(event.data));
    ws.onclose = (event) => this.closed(ws, event);
  }

  receive(frame) {
    if (typeof frame.offset === "number") {
      if (frame.offset <= this.lastOffset) return;
      this.lastOffset = frame.offset;
      this.onMessage(frame.message, frame.offset);
      return;
    }
    if (frame.type === "attached") this.streamId = frame.stream_id;
    if (frame.type === "history") this.lastOffset = -1;
    this.onControl(frame);
  }

  send(command) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(command));
    return true;
  }

  close() {
    this.closedByUs = true;
    if (this.ws) this.ws.close(1000);
  }

  async closed(ws, event) {
    if (ws !== this.ws || this.closedByUs) return;
    if (event.code === CLOSE_FORBIDDEN) {
      this.onState("refused");
      return;
    }
    if (event.code === CLOSE_TOO_BIG) {
      this.closedByUs = true;
      this.onState("too-large");
      return;
    }
    if (event.code === CLOSE_UNAUTHORIZED && !(await askToken({ retry: true }))) {
      this.onState("unauthorized");
      return;
    }
    this.onState("reconnecting");
    const delay = Math.min(5000, 250 * 2 ** this.retries);
    this.retries += 1;
    setTimeout(() => { if (!this.closedByUs) this.connect(); }, delay);
  }
}
