/**
 * The workspace's event stream (docs/api.md "Events"): `client.events()` is an async iterator
 * of what happens to the sandboxes as it happens (no polling). A connection that breaks is
 * opened again with the last event's id, so no event in kilnd's window (its last 8192 events,
 * an hour at most) is missed; one that cannot be resumed yields a `resync` event (list again).
 */
import type { Client } from "./client.js";
import { ConnectionFailed, Timeout } from "./errors.js";
import { sseEvents } from "./stream.js";

/** kilnd sends a comment every 15 s; this much silence means it is gone. */
export const EVENTS_SILENCE_MS = 60_000;

/**
 * One event: `kind` is sandbox (its lifecycle), exec, ttl, usage or resync; `type` what happened
 * (created, ready, paused, resumed, hibernated, woken, forked, failed, deleting, deleted,
 * exec_started, exec_ended, ttl_warning; "usage" and "resync" for those kinds); `data` the whole
 * JSON object; `id` the event's id (undefined for usage and resync).
 */
export interface KilnEvent {
  kind: string;
  type: string;
  sandboxId: string;
  id?: string;
  data: Record<string, unknown>;
}

export interface EventsOptions {
  /** Only this sandbox's events. */
  sandbox?: string;
  /** Resume after this event id: the events after it come first. */
  lastEventId?: string;
  /** How many times in a row a broken connection is opened again (default 3). */
  reconnects?: number;
  signal?: AbortSignal;
}

/** An open event stream: iterate it for KilnEvents; close() ends it. */
export class EventStream implements AsyncIterable<KilnEvent> {
  /** The id of the last event yielded, to resume from later. */
  lastEventId: string | undefined;
  private closed = false;
  private ctl = new AbortController();
  private first: ReadableStream<Uint8Array> | undefined;

  private constructor(private readonly client: Client, private readonly options: EventsOptions = {}) {
    this.lastEventId = options.lastEventId;
  }

  /** A stream already connected: what happens from now on (or after lastEventId) is in it. */
  static async open(client: Client, options: EventsOptions = {}): Promise<EventStream> {
    const s = new EventStream(client, options);
    s.first = await s.open();
    return s;
  }

  private async open(): Promise<ReadableStream<Uint8Array>> {
    this.ctl = new AbortController();
    const signal = this.options.signal ? AbortSignal.any([this.options.signal, this.ctl.signal]) : this.ctl.signal;
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    if (this.lastEventId) headers["Last-Event-ID"] = this.lastEventId;
    const resp = await this.client.request("GET", "/v1/events", {
      query: this.options.sandbox ? { sandbox: this.options.sandbox } : undefined,
      timeoutMs: null, ok: [200], signal, headers,
    });
    if (!resp.body) throw new TypeError("the stream has no body");
    return resp.body;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<KilnEvent> {
    const max = this.options.reconnects ?? 3;
    let left = max;
    try {
      while (!this.closed) {
        const body = this.first ?? await this.open();
        this.first = undefined;
        try {
          for await (const ev of sseEvents(body, EVENTS_SILENCE_MS, () => this.ctl.abort())) {
            let d: Record<string, unknown>;
            try {
              d = JSON.parse(ev.data);
            } catch {
              continue;
            }
            if (ev.id) this.lastEventId = ev.id;
            left = max;
            const sandboxId = String(d.id ?? "");
            if (ev.event === "resync") yield { kind: "resync", type: "resync", sandboxId: "", data: {} };
            else if (ev.event === "usage") yield { kind: "usage", type: "usage", sandboxId, data: d };
            else yield { kind: ev.event, type: String(d.type ?? ""), sandboxId, id: ev.id, data: d };
          }
        } catch (e) {
          if (this.closed) return;
          if (!(e instanceof ConnectionFailed || e instanceof Timeout)) throw e;
        }
        if (this.closed || left <= 0) return;
        left--;
      }
    } finally {
      this.close();
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.ctl.abort();
    this.first?.cancel().catch(() => {});
  }
}
