/**
 * The webhook deliveries already handled, kept on disk beside the pending deletions file
 * (`<PURGER_DATABASE_PATH>.seen`), so that a replayed delivery runs nothing: not with the same
 * `X-Webhook-Id`, not with a new one (the id is not signed; the body is, so its hash is kept too),
 * not after a restart. The server takes only bodies whose signed timestamp is within FRESHNESS_MS of
 * now, so an entry is needed only until its timestamp is FRESHNESS_MS (plus a margin for clock
 * steps) old; older entries are dropped and the file stays small.
 *
 * One JSON object per line: `{"id":"01J...","body":"<SHA-256 hex of the body>","timestamp":"...Z"}`.
 * Every change is written atomically (pending.ts writeAtomically); concurrent changes share a write.
 */
import { readFile } from "node:fs/promises";
import { formatTimestamp, parseTimestamp, removeTemporaries, writeAtomically } from "./pending.ts";

/** How far a webhook's timestamp may lie from now, either way. */
export const FRESHNESS_MS = 5 * 60_000;
/** How much longer than the freshness window an entry is kept (clock steps, a slow delivery). */
export const KEEP_MARGIN_MS = 5 * 60_000;
/** Longer delivery ids are not kept (the service's are 26-character ULIDs; the body hash still counts). */
const MAX_ID_LENGTH = 200;

export interface Delivery {
  /** X-Webhook-Id, when there was one. */
  id: string | null;
  /** SHA-256 of the raw body, hex. */
  body: string;
  /** The body's own (signed) timestamp. */
  timestamp: Date;
}

export class SeenDeliveries {
  readonly path: string;
  readonly #byBody = new Map<string, Delivery>();
  readonly #byId = new Map<string, Delivery>();
  /** A write not yet started: changes made until it starts are in it. */
  #queued: Promise<void> | null = null;
  #last: Promise<void> = Promise.resolve();

  constructor(path: string) {
    this.path = path;
  }

  /** Reads the file (a missing one is empty); returns the lines that did not parse, which are dropped. */
  async init(now = new Date()): Promise<string[]> {
    await removeTemporaries(this.path);
    let text = "";
    try {
      text = await readFile(this.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
    const bad: string[] = [];
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      const delivery = parseLine(line);
      if (delivery) this.#add(delivery);
      else bad.push(line.slice(0, 200));
    }
    this.#prune(now);
    // Written once at start: the file exists (and is writable) before the first webhook.
    await this.#persist();
    return bad;
  }

  get size(): number {
    return this.#byBody.size;
  }

  /**
   * Takes a delivery as handled unless its id or its body was seen: "seen" then, and nothing is
   * changed. Otherwise it is recorded, and the promise resolves once that is on disk ("new"). The
   * check and the record happen before anything is awaited, so of two concurrent copies exactly one
   * is "new".
   */
  async claim(delivery: Delivery, now = new Date()): Promise<"new" | "seen"> {
    this.#prune(now);
    if (this.#byBody.has(delivery.body) || (delivery.id !== null && this.#byId.has(delivery.id)))
      return "seen";
    const kept = {
      ...delivery,
      id: delivery.id !== null && delivery.id.length <= MAX_ID_LENGTH ? delivery.id : null,
    };
    this.#add(kept);
    try {
      await this.#persist();
    } catch (error) {
      this.#remove(kept);
      throw error;
    }
    return "new";
  }

  /** Forgets a claimed delivery whose event could not be handled, so that the service's retry is taken. */
  async release(delivery: Delivery): Promise<void> {
    const kept = this.#byBody.get(delivery.body);
    if (!kept) return;
    this.#remove(kept);
    await this.#persist();
  }

  /** Resolves when every write is done. */
  async idle(): Promise<void> {
    await this.#last.catch(() => {});
  }

  #add(delivery: Delivery): void {
    this.#byBody.set(delivery.body, delivery);
    if (delivery.id !== null) this.#byId.set(delivery.id, delivery);
  }

  #remove(delivery: Delivery): void {
    this.#byBody.delete(delivery.body);
    if (delivery.id !== null && this.#byId.get(delivery.id) === delivery) this.#byId.delete(delivery.id);
  }

  #prune(now: Date): void {
    const oldest = now.getTime() - FRESHNESS_MS - KEEP_MARGIN_MS;
    for (const delivery of this.#byBody.values()) {
      if (delivery.timestamp.getTime() < oldest) this.#remove(delivery);
    }
  }

  #persist(): Promise<void> {
    if (this.#queued) return this.#queued;
    const write = this.#last
      .catch(() => {})
      .then(() => {
        this.#queued = null;
        const text = [...this.#byBody.values()]
          .map(
            (d) => `${JSON.stringify({ id: d.id, body: d.body, timestamp: formatTimestamp(d.timestamp) })}\n`,
          )
          .join("");
        return writeAtomically(this.path, text);
      });
    this.#queued = write;
    this.#last = write;
    return write;
  }
}

function parseLine(line: string): Delivery | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof value !== "object" || value === null) return null;
  const { id, body, timestamp } = value as Record<string, unknown>;
  if (id !== null && typeof id !== "string") return null;
  if (typeof body !== "string" || !/^[0-9a-f]{64}$/.test(body) || typeof timestamp !== "string") return null;
  const time = parseTimestamp(timestamp);
  return time ? { id, body, timestamp: time } : null;
}
