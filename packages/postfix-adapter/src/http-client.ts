/**
 * The adapter's HTTP/1.1 client for the account service: a keep-alive connection pool made for
 * this one job, asking the service's `mta` endpoints for short JSON answers.
 *
 * Why not a general client: every socketmap lookup and policy request crosses it, and undici's
 * Pool (dispatch API) cost the adapter about 52,000 instructions per request, against about 12,000
 * for this one; with undici the adapter spent more CPU per lookup than the service answering it
 * (bench/README.md, "The Postfix adapter"). What it does, and nothing else:
 *
 * - one request at a time per connection (no pipelining), so an answer always belongs to the
 *   request just sent; at most `maxConnections`, the rest wait in order;
 * - answers framed by Content-Length, chunked encoding, or the end of the connection; interim 1xx
 *   answers skipped; anything else (a malformed status line or header, both Content-Length and
 *   chunked, an upgrade, a head over 16 KiB, a body over `maxBodyBytes`) fails that request and
 *   closes its connection; bytes after a complete answer, or on an idle connection, close it too.
 *   So a misread answer is not taken for another key's, as long as the server sends no answer
 *   nobody asked for (over HTTP/1.1, no client can tell one that arrives just as the next request
 *   goes out);
 * - `timeoutMs` bounds each request from the moment it is asked: waiting for a connection,
 *   connecting, and the whole answer. One timer sweeps every connection instead of a timer per
 *   request;
 * - a request whose connection broke before any byte of its answer goes out once more on another
 *   connection when the caller marked it idempotent (a lookup), never otherwise (a sign-in the
 *   service may have counted);
 * - idle connections close after 4 s, before the service's keep-alive limit (Node's: 5 s).
 */
import { connect as connectTcp, isIP, type Socket } from "node:net";
import { connect as connectTls } from "node:tls";

/** Longest status line and header block accepted. */
const MAX_HEAD_BYTES = 16 * 1024;
/** An idle connection is closed after this. */
const IDLE_MS = 4000;

export interface HttpAnswer {
  status: number;
  body: Buffer;
}

/**
 * Why a request failed: `timeout` (no whole answer within timeoutMs), `connect` (no connection),
 * `lost` (the connection broke before the answer was complete), `protocol` (an answer this client
 * does not accept), `closed` (the pool was closed).
 */
export type HttpErrorKind = "timeout" | "connect" | "lost" | "protocol" | "closed";

export class HttpError extends Error {
  readonly kind: HttpErrorKind;

  constructor(kind: HttpErrorKind, message: string) {
    super(message);
    this.name = "HttpError";
    this.kind = kind;
  }
}

export interface HttpPoolOptions {
  url: URL;
  maxConnections: number;
  timeoutMs: number;
  maxBodyBytes: number;
}

interface Pending {
  /** Head and body, written at once. */
  readonly request: string;
  readonly idempotent: boolean;
  /** Sent once more already. */
  retried: boolean;
  /** performance.now() by which the whole answer must be in. */
  readonly deadline: number;
  readonly resolve: (answer: HttpAnswer) => void;
  readonly reject: (error: HttpError) => void;
}

export class HttpPool {
  readonly #options: HttpPoolOptions;
  readonly #secure: boolean;
  readonly #host: string;
  readonly #port: number;
  readonly #hostHeader: string;
  readonly #idle: Connection[] = [];
  readonly #connections = new Set<Connection>();
  #queue: Pending[] = [];
  #sweeper: NodeJS.Timeout | null = null;
  #closing = false;
  #closed: Promise<void> | null = null;
  #drained: (() => void) | null = null;

  constructor(options: HttpPoolOptions) {
    this.#options = options;
    this.#secure = options.url.protocol === "https:";
    this.#host = options.url.hostname.replace(/^\[|\]$/g, "");
    this.#port = Number(options.url.port || (this.#secure ? 443 : 80));
    this.#hostHeader = `host: ${options.url.host}\r\n`;
  }

  /**
   * Sends one request. `headerLines` are complete lines ("name: value\r\n" each), without Host and
   * Content-Length (added here). `idempotent`: may be sent once more if its connection breaks
   * before any byte of the answer.
   */
  request(method: string, path: string, headerLines: string, body?: string, idempotent = false) {
    let head = `${method} ${path} HTTP/1.1\r\n${this.#hostHeader}${headerLines}`;
    if (body !== undefined) head += `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    else head += "\r\n";
    return new Promise<HttpAnswer>((resolve, reject) => {
      if (this.#closing) {
        reject(new HttpError("closed", "client closed"));
        return;
      }
      const pending: Pending = {
        request: head,
        idempotent,
        retried: false,
        deadline: performance.now() + this.#options.timeoutMs,
        resolve,
        reject,
      };
      this.#sweep(true);
      const idle = this.#queue.length === 0 ? this.#idle.pop() : undefined;
      if (idle) idle.send(pending);
      else {
        this.#queue.push(pending);
        this.#dispatch();
      }
    });
  }

  /** New requests fail at once; those under way and waiting are answered; then every connection closes. */
  close(): Promise<void> {
    if (this.#closed) return this.#closed;
    this.#closing = true;
    for (const connection of this.#idle.splice(0)) connection.destroy();
    if (this.#connections.size === 0 && this.#queue.length === 0) {
      this.#stopSweeper();
      this.#closed = Promise.resolve();
    } else {
      this.#closed = new Promise((done) => {
        this.#drained = done;
      });
    }
    return this.#closed;
  }

  // --- what the connections report -----------------------------------------------------------

  /** A connection is free again. */
  released(connection: Connection): void {
    const next = this.#nextInTime();
    if (next) {
      connection.send(next);
      return;
    }
    if (this.#closing) {
      connection.destroy();
      return;
    }
    this.#idle.push(connection);
  }

  /** A connection closed; `retry` is its request, to go out once more. */
  gone(connection: Connection, retry: Pending | null): void {
    this.#connections.delete(connection);
    const index = this.#idle.lastIndexOf(connection);
    if (index >= 0) this.#idle.splice(index, 1);
    // First in line: it has waited its turn already.
    if (retry) this.#queue.unshift(retry);
    this.#dispatch();
    if (this.#closing && this.#connections.size === 0 && this.#queue.length === 0) {
      this.#stopSweeper();
      this.#drained?.();
      this.#drained = null;
    }
  }

  // -------------------------------------------------------------------------------------------

  #dispatch(): void {
    while (this.#queue.length > 0) {
      if (this.#idle.length === 0 && this.#connections.size >= this.#options.maxConnections) return;
      const next = this.#nextInTime();
      if (!next) return;
      (this.#idle.pop() ?? this.#connect()).send(next);
    }
  }

  /**
   * The first waiting request that still has time; those whose time ran out since the last sweep
   * fail here rather than go out late (a sign-in the caller was told had timed out must not reach
   * the service after all).
   */
  #nextInTime(): Pending | undefined {
    if (this.#queue.length === 0) return undefined;
    const now = performance.now();
    for (;;) {
      const next = this.#queue.shift();
      if (!next || next.deadline > now) return next;
      next.reject(timedOut(this.#options.timeoutMs));
    }
  }

  #connect(): Connection {
    const host = this.#host;
    const socket = this.#secure
      ? connectTls({
          host,
          port: this.#port,
          ...(isIP(host) === 0 ? { servername: host } : {}),
          ALPNProtocols: ["http/1.1"],
        })
      : connectTcp({ host, port: this.#port });
    socket.setNoDelay(true);
    const connection = new Connection(socket, this.#secure, this.#options.maxBodyBytes, this);
    this.#connections.add(connection);
    return connection;
  }

  /** Starts the sweeper if needed (`starting`), or fails what ran out of time and closes idle connections. */
  #sweep(starting = false): void {
    if (starting) {
      if (this.#sweeper === null) {
        const every = Math.min(100, Math.max(10, Math.floor(this.#options.timeoutMs / 10)));
        this.#sweeper = setInterval(() => this.#sweep(), every);
        this.#sweeper.unref();
      }
      return;
    }
    const now = performance.now();
    if (this.#queue.length > 0 && (this.#queue[0] as Pending).deadline <= now) {
      const waiting = this.#queue;
      this.#queue = waiting.filter((pending) => pending.deadline > now);
      for (const pending of waiting) {
        if (pending.deadline <= now) pending.reject(timedOut(this.#options.timeoutMs));
      }
    }
    for (const connection of this.#connections) connection.check(now, this.#options.timeoutMs);
    if (this.#connections.size === 0 && this.#queue.length === 0) this.#stopSweeper();
  }

  #stopSweeper(): void {
    if (this.#sweeper !== null) clearInterval(this.#sweeper);
    this.#sweeper = null;
  }
}

function timedOut(timeoutMs: number): HttpError {
  return new HttpError("timeout", `no answer within ${timeoutMs} ms (SERVICE_TIMEOUT)`);
}

/** How the body of the answer being read ends (numbers: this is the per-answer hot path). */
const Framing = { Head: 0, Length: 1, Chunked: 2, UntilClose: 3 } as const;
type Framing = (typeof Framing)[keyof typeof Framing];

/** One connection: sends a request, reads its answer, then offers itself back to the pool. */
class Connection {
  readonly #socket: Socket;
  readonly #pool: HttpPool;
  readonly #maxBody: number;
  #connected = false;
  #pending: Pending | null = null;
  #received = false;
  #idleSince = performance.now();
  #dead = false;
  // The answer being read.
  #buffer: Buffer | null = null;
  #status = 0;
  #keepAlive = true;
  #framing: Framing = Framing.Head;
  #length = 0;
  #chunks: Buffer[] = [];
  #bodyBytes = 0;

  constructor(socket: Socket, secure: boolean, maxBody: number, pool: HttpPool) {
    this.#socket = socket;
    this.#maxBody = maxBody;
    this.#pool = pool;
    socket.once(secure ? "secureConnect" : "connect", () => {
      this.#connected = true;
    });
    socket.on("data", (chunk: Buffer) => this.#data(chunk));
    socket.on("error", (error: Error) => this.#fail(error.message));
    socket.on("end", () => {
      // An answer whose body runs until the connection closes is complete now.
      if (this.#pending && this.#framing === Framing.UntilClose) {
        this.#complete(false);
        return;
      }
      this.#fail("connection closed by the service");
    });
    socket.on("close", () => this.#fail("connection closed by the service"));
  }

  send(pending: Pending): void {
    this.#pending = pending;
    this.#received = false;
    this.#buffer = null;
    this.#framing = Framing.Head;
    this.#chunks = [];
    this.#bodyBytes = 0;
    this.#socket.write(pending.request);
  }

  destroy(): void {
    this.#fail("connection closed");
  }

  /** The sweeper's visit. */
  check(now: number, timeoutMs: number): void {
    if (this.#pending) {
      if (this.#pending.deadline <= now) this.#fail("", timedOut(timeoutMs));
    } else if (now - this.#idleSince >= IDLE_MS) {
      this.destroy();
    }
  }

  #data(chunk: Buffer): void {
    if (!this.#pending) {
      // Bytes nobody asked for: this connection can no longer be trusted.
      this.destroy();
      return;
    }
    this.#received = true;
    this.#buffer = this.#buffer === null ? chunk : Buffer.concat([this.#buffer, chunk]);
    let complete: boolean;
    try {
      complete = this.#parse();
    } catch (error) {
      this.#fail("", error instanceof HttpError ? error : new HttpError("protocol", String(error)));
      return;
    }
    if (complete) this.#complete(true);
  }

  /** Hands the answer over; the connection goes back to the pool if it can carry another. */
  #complete(reusable: boolean): void {
    const pending = this.#pending as Pending;
    this.#pending = null;
    const body = this.#chunks.length === 1 ? (this.#chunks[0] as Buffer) : Buffer.concat(this.#chunks);
    this.#chunks = [];
    const extra = this.#buffer !== null && this.#buffer.length > 0;
    this.#buffer = null;
    pending.resolve({ status: this.#status, body });
    if (!reusable || !this.#keepAlive || extra) {
      this.destroy();
      return;
    }
    this.#idleSince = performance.now();
    this.#pool.released(this);
  }

  /** Reads what has arrived; true once the whole answer is in. Throws HttpError on what it refuses. */
  #parse(): boolean {
    for (;;) {
      const buffer = this.#buffer as Buffer;
      switch (this.#framing) {
        case Framing.Head: {
          const end = buffer.indexOf("\r\n\r\n");
          if (end < 0 || end > MAX_HEAD_BYTES) {
            if (end > MAX_HEAD_BYTES || buffer.length > MAX_HEAD_BYTES) {
              throw new HttpError("protocol", "answer headers too large");
            }
            return false;
          }
          const interim = this.#head(buffer.toString("latin1", 0, end));
          this.#buffer = buffer.subarray(end + 4);
          if (interim) continue; // a 1xx answer: the real one follows
          // #head() just set the framing (TypeScript still sees Head here).
          if ((this.#framing as Framing) === Framing.Length && this.#length === 0) return true;
          continue;
        }
        case Framing.Length: {
          if (buffer.length < this.#length) return false;
          this.#chunks.push(buffer.subarray(0, this.#length));
          this.#buffer = buffer.subarray(this.#length);
          return true;
        }
        case Framing.UntilClose: {
          this.#take(buffer);
          this.#buffer = null;
          return false;
        }
        case Framing.Chunked: {
          // Size line, data, CRLF; a zero size ends the body, then trailers and an empty line.
          const lineEnd = buffer.indexOf("\r\n");
          if (lineEnd < 0) {
            if (buffer.length > 1024) throw new HttpError("protocol", "malformed chunk size");
            return false;
          }
          const sizeText = buffer.toString("latin1", 0, lineEnd).split(";")[0]?.trim() ?? "";
          if (!/^[0-9a-fA-F]{1,8}$/.test(sizeText)) throw new HttpError("protocol", "malformed chunk size");
          const size = Number.parseInt(sizeText, 16);
          if (size === 0) {
            // "0\r\n", then trailer lines (usually none) and an empty line.
            const trailersEnd = buffer.indexOf("\r\n\r\n", lineEnd);
            if (trailersEnd < 0) {
              if (buffer.length > MAX_HEAD_BYTES)
                throw new HttpError("protocol", "answer trailers too large");
              return false;
            }
            this.#buffer = buffer.subarray(trailersEnd + 4);
            return true;
          }
          const dataStart = lineEnd + 2;
          if (buffer.length < dataStart + size + 2) {
            if (this.#bodyBytes + size > this.#maxBody) this.#tooLarge();
            return false;
          }
          if (buffer[dataStart + size] !== 0x0d || buffer[dataStart + size + 1] !== 0x0a) {
            throw new HttpError("protocol", "malformed chunk");
          }
          this.#take(buffer.subarray(dataStart, dataStart + size));
          this.#buffer = buffer.subarray(dataStart + size + 2);
          continue;
        }
      }
    }
  }

  /** Reads a status line and headers; true when it was an interim (1xx) answer. */
  #head(head: string): boolean {
    // "HTTP/1.x NNN reason"
    const minor = head.charCodeAt(7);
    if (!head.startsWith("HTTP/1.") || (minor !== 0x30 && minor !== 0x31) || head.charCodeAt(8) !== 0x20) {
      throw new HttpError("protocol", "malformed status line");
    }
    const code = digit(head, 9) * 100 + digit(head, 10) * 10 + digit(head, 11);
    // A space and a reason phrase follow the code; some servers send neither.
    const after = head.length > 12 ? head.charCodeAt(12) : 0x20;
    if (Number.isNaN(code) || code < 100 || (after !== 0x20 && after !== 0x0d)) {
      throw new HttpError("protocol", "malformed status line");
    }
    if (code < 200) {
      if (code === 101) throw new HttpError("protocol", "unexpected protocol switch");
      return true;
    }
    this.#status = code;
    this.#keepAlive = minor === 0x31;
    let length = -1;
    let chunked = false;
    // Header lines are walked in place; only three matter, and their names' lengths pick them out
    // before anything is sliced or lower-cased.
    const firstLineEnd = head.indexOf("\r\n");
    let start = firstLineEnd < 0 ? head.length : firstLineEnd + 2;
    while (start < head.length) {
      let end = head.indexOf("\r\n", start);
      if (end < 0) end = head.length;
      const colon = head.indexOf(":", start);
      if (colon <= start || colon >= end) throw new HttpError("protocol", "malformed header line");
      const nameLength = colon - start;
      if (nameLength === 14 || nameLength === 17 || nameLength === 10) {
        const name = head.slice(start, colon).toLowerCase();
        const value = head.slice(colon + 1, end).trim();
        if (name === "content-length") {
          if (!/^\d{1,15}$/.test(value) || (length >= 0 && length !== Number(value))) {
            throw new HttpError("protocol", "malformed Content-Length");
          }
          length = Number(value);
        } else if (name === "transfer-encoding") {
          if (value.toLowerCase() !== "chunked") {
            throw new HttpError("protocol", `unsupported Transfer-Encoding ${value}`);
          }
          chunked = true;
        } else if (name === "connection") {
          const options = value
            .toLowerCase()
            .split(",")
            .map((option) => option.trim());
          if (options.includes("close")) this.#keepAlive = false;
          else if (options.includes("keep-alive")) this.#keepAlive = true;
        }
      }
      start = end + 2;
    }
    if (chunked && length >= 0) throw new HttpError("protocol", "both Content-Length and chunked");
    if (code === 204 || code === 304) {
      this.#framing = Framing.Length;
      this.#length = 0;
    } else if (chunked) {
      this.#framing = Framing.Chunked;
    } else if (length >= 0) {
      if (length > this.#maxBody) this.#tooLarge();
      this.#framing = Framing.Length;
      this.#length = length;
    } else {
      this.#framing = Framing.UntilClose;
      this.#keepAlive = false;
    }
    return false;
  }

  #take(data: Buffer): void {
    this.#bodyBytes += data.length;
    if (this.#bodyBytes > this.#maxBody) this.#tooLarge();
    this.#chunks.push(data);
  }

  #tooLarge(): never {
    throw new HttpError("protocol", `answer larger than ${this.#maxBody} bytes`);
  }

  /**
   * Ends this connection and fails its request: sent once more when it is idempotent, was not
   * sent again already, the connection had been established and no byte of the answer came.
   */
  #fail(message: string, error?: HttpError): void {
    const pending = this.#pending;
    this.#pending = null;
    if (this.#dead) {
      pending?.reject(error ?? new HttpError("lost", message || "connection closed"));
      return;
    }
    let retry: Pending | null = null;
    if (pending) {
      const failure =
        error ?? new HttpError(this.#connected ? "lost" : "connect", message || "connection failed");
      if (failure.kind === "lost" && !this.#received && pending.idempotent && !pending.retried) {
        pending.retried = true;
        retry = pending;
      } else {
        pending.reject(failure);
      }
    }
    this.#dead = true;
    this.#socket.destroy();
    this.#pool.gone(this, retry);
  }
}

/** The decimal digit at `index`, NaN if there is none. */
function digit(text: string, index: number): number {
  const code = text.charCodeAt(index) - 0x30;
  return code >= 0 && code <= 9 ? code : Number.NaN;
}
