/**
 * An interactive terminal in a sandbox: GET .../pty as a WebSocket
 * (docs/api.md, "Terminal"). Binary messages are keyboard input and
 * terminal output; text messages are JSON: resize from us, exit or error
 * from the server.
 *
 * Under Node the WebSocket is the SDK's own small RFC 6455 client over
 * node:http (Node 20 has no global WebSocket, and a browser-style one
 * cannot send the Authorization header). Elsewhere the runtime's WebSocket
 * is used, given the header as Bun and Deno accept it.
 */
import { ConnectionFailed, KilnError, errorFor } from "./errors.js";
import type { Client } from "./client.js";

export interface PtyOptions {
  cols?: number;
  rows?: number;
  /** A shell command instead of the login shell. */
  cmd?: string;
}

interface WsConn {
  send(binary: boolean, data: Uint8Array): void;
  close(): void;
}

interface WsHandlers {
  message(binary: boolean, data: Uint8Array): void;
  closed(err?: Error): void;
}

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** RFC 6455 client over a Node socket. */
async function nodeWebSocket(url: URL, headers: Record<string, string>, h: WsHandlers): Promise<WsConn> {
  const crypto = await import("node:crypto");
  const http = url.protocol === "https:" ? await import("node:https") : await import("node:http");
  const key = crypto.randomBytes(16).toString("base64");
  const req = http.request({
    hostname: url.hostname.replace(/^\[|\]$/g, ""),
    port: url.port || (url.protocol === "https:" ? 443 : 80),
    path: url.pathname + url.search,
    headers: {
      ...headers, Connection: "Upgrade", Upgrade: "websocket",
      "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": key,
    },
  });
  const { socket, head } = await new Promise<{ socket: import("node:net").Socket; head: Buffer }>((resolve, reject) => {
    req.on("upgrade", (res, socket, head) => {
      const want = crypto.createHash("sha1").update(key + GUID).digest("base64");
      if (res.headers["sec-websocket-accept"] !== want) {
        socket.destroy();
        reject(new ConnectionFailed("the terminal's WebSocket handshake failed (bad Sec-WebSocket-Accept)", "websocket_error"));
        return;
      }
      resolve({ socket: socket as import("node:net").Socket, head });
    });
    req.on("response", (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("end", () => {
        const text = Buffer.concat(parts).toString();
        let code = `http_${res.statusCode}`, message = text || String(res.statusMessage);
        try {
          const e = JSON.parse(text).error;
          code = e.code;
          message = e.message;
        } catch { /* keep the text */ }
        reject(errorFor(res.statusCode, code, message));
      });
    });
    req.on("error", (e) => reject(new ConnectionFailed(`cannot open the terminal: ${e.message}`, "connection_error", undefined, { cause: e })));
    req.end();
  });
  socket.setNoDelay(true);

  const frame = (opcode: number, payload: Uint8Array): Buffer => {
    const n = payload.length;
    const len = n < 126 ? 1 : n < 65536 ? 3 : 9;
    const out = Buffer.alloc(1 + len + 4 + n);
    out[0] = 0x80 | opcode;
    if (n < 126) out[1] = 0x80 | n;
    else if (n < 65536) {
      out[1] = 0x80 | 126;
      out.writeUInt16BE(n, 2);
    } else {
      out[1] = 0x80 | 127;
      out.writeBigUInt64BE(BigInt(n), 2);
    }
    const mask = crypto.randomBytes(4);
    mask.copy(out, 1 + len);
    for (let i = 0; i < n; i++) out[1 + len + 4 + i] = payload[i] ^ mask[i & 3];
    return out;
  };

  let buf: Buffer = head.length ? Buffer.from(head) : Buffer.alloc(0);
  let parts: Buffer[] = [];
  let partOp = 0;
  let done = false;
  const finish = (err?: Error) => {
    if (done) return;
    done = true;
    socket.destroy();
    h.closed(err);
  };
  const parse = () => {
    while (buf.length >= 2) {
      const fin = (buf[0] & 0x80) !== 0, op = buf[0] & 0x0f, masked = (buf[1] & 0x80) !== 0;
      let n = buf[1] & 0x7f, off = 2;
      if (n === 126) {
        if (buf.length < 4) return;
        n = buf.readUInt16BE(2);
        off = 4;
      } else if (n === 127) {
        if (buf.length < 10) return;
        n = Number(buf.readBigUInt64BE(2));
        off = 10;
      }
      const maskOff = off;
      if (masked) off += 4;
      if (buf.length < off + n) return;
      let payload = buf.subarray(off, off + n);
      if (masked) {
        payload = Buffer.from(payload);
        for (let i = 0; i < n; i++) payload[i] ^= buf[maskOff + (i & 3)];
      }
      buf = buf.subarray(off + n);
      if (op === 0x8) {              // close: answer it, then we are done
        if (!socket.destroyed) socket.write(frame(0x8, payload.subarray(0, 2)));
        finish();
        return;
      } else if (op === 0x9) {       // ping
        socket.write(frame(0xa, payload));
      } else if (op === 0xa) {       // pong
      } else {
        if (op !== 0) partOp = op;
        parts.push(Buffer.from(payload));
        if (fin) {
          const msg = Buffer.concat(parts);
          parts = [];
          h.message(partOp === 0x2, new Uint8Array(msg.buffer, msg.byteOffset, msg.length));
        }
      }
    }
  };
  socket.on("data", (d: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, d]) : d;
    parse();
  });
  socket.on("close", () => finish());
  socket.on("error", (e) => finish(e));
  if (buf.length) queueMicrotask(parse);
  return {
    send(binary, data) {
      if (!done) socket.write(frame(binary ? 0x2 : 0x1, data));
    },
    close() {
      if (done) return;
      socket.write(frame(0x8, new Uint8Array([0x03, 0xe8])));  // 1000, normal
      socket.end();
    },
  };
}

/** The runtime's WebSocket, where it takes headers (Bun, Deno). */
async function runtimeWebSocket(url: URL, headers: Record<string, string>, h: WsHandlers): Promise<WsConn> {
  const WS = (globalThis as { WebSocket?: new (url: string, opts?: unknown) => WebSocket }).WebSocket;
  if (!WS) throw new KilnError("this runtime has no WebSocket: the terminal needs one", "no_websocket");
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WS(url.toString(), { headers });
  ws.binaryType = "arraybuffer";
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new ConnectionFailed("cannot open the terminal's WebSocket", "websocket_error"));
  });
  ws.onmessage = (ev: MessageEvent) => {
    if (typeof ev.data === "string") h.message(false, new TextEncoder().encode(ev.data));
    else h.message(true, new Uint8Array(ev.data as ArrayBuffer));
  };
  ws.onclose = () => h.closed();
  ws.onerror = () => h.closed(new ConnectionFailed("the terminal's WebSocket failed", "websocket_error"));
  return {
    send: (binary, data) => ws.send(binary ? data : new TextDecoder().decode(data)),
    close: () => ws.close(1000),
  };
}

/**
 * A terminal session. Iterate it for output; `write` types, `resize`
 * changes the window; `exit` resolves with the exit code when the shell
 * ends (and rejects if the session fails).
 */
export class Pty implements AsyncIterable<Uint8Array> {
  readonly exit: Promise<number>;
  private conn: WsConn | undefined;
  private queue: Uint8Array[] = [];
  private waiting: (() => void) | undefined;
  private ended = false;
  private exitCode: number | undefined;
  private failure: Error | undefined;
  private settle!: { resolve: (n: number) => void; reject: (e: Error) => void };

  private constructor() {
    this.exit = new Promise<number>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.exit.catch(() => undefined);
  }

  /** Open a terminal (Sandbox.pty does this). */
  static async open(client: Client, path: string, options: PtyOptions = {}): Promise<Pty> {
    const pty = new Pty();
    const url = new URL(client.url(path, { cols: options.cols, rows: options.rows, cmd: options.cmd }));
    const headers = client.headers();
    delete headers.Accept;
    const handlers: WsHandlers = {
      message: (binary, data) => pty.onMessage(binary, data),
      closed: (err) => pty.onClosed(err),
    };
    const isNode = typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === "string";
    pty.conn = isNode ? await nodeWebSocket(url, headers, handlers) : await runtimeWebSocket(url, headers, handlers);
    return pty;
  }

  private onMessage(binary: boolean, data: Uint8Array) {
    if (binary) {
      this.queue.push(data);
    } else {
      try {
        const m = JSON.parse(new TextDecoder().decode(data));
        if (m.type === "exit") this.exitCode = Number(m.exit_code);
        else if (m.type === "error") this.failure = new KilnError(String(m.message), "pty_error");
      } catch { /* not a message of ours */ }
    }
    this.wake();
  }

  private onClosed(err?: Error) {
    this.ended = true;
    if (this.exitCode !== undefined) this.settle.resolve(this.exitCode);
    else this.settle.reject(this.failure ?? err ?? new ConnectionFailed("the terminal closed without an exit status", "pty_closed"));
    this.wake();
  }

  private wake() {
    const w = this.waiting;
    this.waiting = undefined;
    w?.();
  }

  /** Type into the terminal. */
  write(data: string | Uint8Array): void {
    this.conn?.send(true, typeof data === "string" ? new TextEncoder().encode(data) : data);
  }

  resize(cols: number, rows: number): void {
    this.conn?.send(false, new TextEncoder().encode(JSON.stringify({ type: "resize", cols, rows })));
  }

  /** Close the session (the shell is hung up). */
  close(): void {
    this.conn?.close();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array> {
    for (;;) {
      const next = this.queue.shift();
      if (next) {
        yield next;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((resolve) => { this.waiting = resolve; });
    }
  }

  /** Output as text until `pattern` shows up (or the session ends); returns all of it. */
  async readUntil(pattern: string | RegExp, timeoutMs = 30_000): Promise<string> {
    const decoder = new TextDecoder();
    let text = "";
    const deadline = Date.now() + timeoutMs;
    const found = () => typeof pattern === "string" ? text.includes(pattern) : pattern.test(text);
    while (!found()) {
      const next = this.queue.shift();
      if (next) {
        text += decoder.decode(next, { stream: true });
        continue;
      }
      if (this.ended) break;
      const left = deadline - Date.now();
      if (left <= 0) break;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiting = () => { clearTimeout(t); resolve(); };
      });
    }
    if (!found()) throw new KilnError(`terminal output did not show ${String(pattern)}; it was: ${JSON.stringify(text.slice(-500))}`, "pty_timeout");
    return text;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.close();
  }
}
