/**
 * A small HTTP/1.1 client with a keep-alive connection pool, for the service's short JSON answers.
 *
 * Why not node:http: its client costs about 45 µs of CPU per request here, three times what the
 * service itself spends answering a lookup, and it made the adapter the bottleneck of every lookup
 * (bench/README.md, "The Postfix adapter"). This client does what the adapter needs and nothing
 * else: one request at a time per connection (no pipelining, so an answer always belongs to the
 * request just sent), bodies framed by Content-Length or chunked encoding, and anything it does
 * not understand closes that connection and fails that request (the caller answers TEMP), so a
 * misread answer can never be taken for another key's.
 */
import { connect as connectTcp, type Socket } from "node:net";
import { connect as connectTls } from "node:tls";

/** Longest status line and header block accepted. */
const MAX_HEAD_BYTES = 16 * 1024;
/** An idle connection is closed after this, before the server's keep-alive limit (Node's: 5 s). */
const IDLE_MS = 4000;

export interface HttpAnswer {
  status: number;
  body: Buffer;
}

export class HttpError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HttpError";
  }
}

/** The request never reached the server (a kept-alive connection the server had closed): safe to send again. */
export class StaleConnection extends HttpError {}

export class RequestTimeout extends HttpError {}

export interface PoolOptions {
  url: URL;
  maxConnections: number;
  timeoutMs: number;
  maxBodyBytes: number;
}

interface Pending {
  head: Buffer;
  body: Buffer | undefined;
  /** Sent once more already, after a kept-alive connection turned out to be closed. */
  retried: boolean;
  resolve: (answer: HttpAnswer) => void;
  reject: (error: Error) => void;
}

export class HttpPool {
  readonly #options: PoolOptions;
  readonly #secure: boolean;
  readonly #host: string;
  readonly #port: number;
  readonly #idle: Connection[] = [];
  readonly #queue: Pending[] = [];
  #open = 0;
  #closed = false;

  constructor(options: PoolOptions) {
    this.#options = options;
    this.#secure = options.url.protocol === "https:";
    this.#host = options.url.hostname.replace(/^\[|\]$/g, "");
    this.#port = Number(options.url.port || (this.#secure ? 443 : 80));
  }

  /**
   * Sends one request. `headers` are complete header lines ("Name: value\r\n" each), Host and
   * Content-Length excluded (added here).
   */
  request(method: string, path: string, headers: string, body?: Buffer): Promise<HttpAnswer> {
    const host = this.#options.url.host;
    const length = body ? `Content-Length: ${body.length}\r\n` : "";
    const head = Buffer.from(
      `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n${headers}${length}\r\n`,
      "latin1",
    );
    return new Promise((resolve, reject) => {
      if (this.#closed) {
        reject(new HttpError("client closed"));
        return;
      }
      this.#queue.push({ head, body, retried: false, resolve, reject });
      this.#dispatch();
    });
  }

  close(): void {
    this.#closed = true;
    for (const connection of this.#idle.splice(0)) connection.destroy();
    for (const pending of this.#queue.splice(0)) pending.reject(new HttpError("client closed"));
  }

  #dispatch(): void {
    while (this.#queue.length > 0) {
      let connection = this.#idle.pop();
      if (!connection) {
        if (this.#open >= this.#options.maxConnections) return;
        connection = this.#connect();
      }
      connection.send(this.#queue.shift() as Pending);
    }
  }

  #connect(): Connection {
    this.#open += 1;
    const socket = this.#secure
      ? connectTls({
          host: this.#host,
          port: this.#port,
          servername: this.#host,
          ALPNProtocols: ["http/1.1"],
        })
      : connectTcp({ host: this.#host, port: this.#port });
    socket.setNoDelay(true);
    return new Connection(socket, this.#options, {
      retry: (pending) => {
        // First in line: it has waited its turn already.
        this.#queue.unshift(pending);
      },
      idle: (connection) => {
        if (this.#closed) {
          connection.destroy();
          return;
        }
        this.#idle.push(connection);
        this.#dispatch();
      },
      gone: (connection) => {
        this.#open -= 1;
        const index = this.#idle.indexOf(connection);
        if (index >= 0) this.#idle.splice(index, 1);
        this.#dispatch();
      },
    });
  }
}

interface PoolHooks {
  retry(pending: Pending): void;
  idle(connection: Connection): void;
  gone(connection: Connection): void;
}

/** One connection: sends a request, reads its answer, then offers itself back to the pool. */
class Connection {
  readonly #socket: Socket;
  readonly #options: PoolOptions;
  readonly #pool: PoolHooks;
  #pending: Pending | null = null;
  #parser: AnswerParser | null = null;
  /** Requests answered on this connection: a failure before any byte of the next is "stale". */
  #used = 0;
  #received = false;
  #timer: NodeJS.Timeout | null = null;
  #dead = false;

  constructor(socket: Socket, options: PoolOptions, pool: PoolHooks) {
    this.#socket = socket;
    this.#options = options;
    this.#pool = pool;
    socket.on("data", (chunk: Buffer) => this.#data(chunk));
    socket.on("error", (error) => this.#fail(error));
    socket.on("end", () => {
      // An answer whose body runs until the connection closes is complete now.
      const answer = this.#parser?.finishAtClose();
      const pending = this.#pending;
      if (answer && pending) {
        this.#pending = null;
        this.#used += 1;
        pending.resolve(answer);
      }
      this.#fail(new HttpError("connection closed by the service"));
    });
    socket.on("close", () => this.#fail(new HttpError("connection closed by the service")));
  }

  send(pending: Pending): void {
    this.#clearTimer();
    this.#pending = pending;
    this.#received = false;
    this.#parser = new AnswerParser(this.#options.maxBodyBytes);
    this.#timer = setTimeout(() => {
      this.#fail(new RequestTimeout(`no answer within ${this.#options.timeoutMs} ms (SERVICE_TIMEOUT)`));
    }, this.#options.timeoutMs);
    if (pending.body) this.#socket.write(Buffer.concat([pending.head, pending.body]));
    else this.#socket.write(pending.head);
  }

  destroy(): void {
    this.#fail(new HttpError("connection closed"));
  }

  #data(chunk: Buffer): void {
    const pending = this.#pending;
    const parser = this.#parser;
    if (!pending || !parser) {
      // Bytes nobody asked for: this connection can no longer be trusted.
      this.destroy();
      return;
    }
    this.#received = true;
    let answer: { status: number; body: Buffer; keepAlive: boolean; extra: boolean } | null;
    try {
      answer = parser.push(chunk);
    } catch (error) {
      this.#fail(error instanceof Error ? error : new HttpError(String(error)));
      return;
    }
    if (!answer) return;
    this.#clearTimer();
    this.#pending = null;
    this.#parser = null;
    this.#used += 1;
    pending.resolve({ status: answer.status, body: answer.body });
    if (!answer.keepAlive || answer.extra) {
      this.destroy();
      return;
    }
    this.#timer = setTimeout(() => this.destroy(), IDLE_MS);
    this.#timer.unref();
    this.#pool.idle(this);
  }

  #fail(error: Error): void {
    this.#clearTimer();
    const pending = this.#pending;
    this.#pending = null;
    if (pending) {
      // Nothing came back on a connection that had answered before: the server closed it while it
      // sat idle, before reading this request, so sending it again (once) is safe.
      const stale = this.#used > 0 && !this.#received && !(error instanceof RequestTimeout);
      if (stale && !pending.retried) {
        pending.retried = true;
        this.#pool.retry(pending);
      } else {
        pending.reject(stale ? new StaleConnection(error.message) : error);
      }
    }
    if (!this.#dead) {
      this.#dead = true;
      this.#socket.destroy();
      this.#pool.gone(this);
    }
  }

  #clearTimer(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}

/** Reads one HTTP/1.x answer from successive chunks. */
export class AnswerParser {
  readonly #maxBody: number;
  #buffer: Buffer = Buffer.alloc(0);
  #status = 0;
  #keepAlive = true;
  #mode: "head" | "length" | "chunked" | "close" = "head";
  #length = 0;
  #chunks: Buffer[] = [];
  #bodyBytes = 0;

  constructor(maxBodyBytes: number) {
    this.#maxBody = maxBodyBytes;
  }

  /** The complete answer once it has arrived (extra: bytes followed it), else null. Throws on malformed input. */
  push(chunk: Buffer): { status: number; body: Buffer; keepAlive: boolean; extra: boolean } | null {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    for (;;) {
      if (this.#mode === "head") {
        const end = this.#buffer.indexOf("\r\n\r\n");
        if (end < 0) {
          if (this.#buffer.length > MAX_HEAD_BYTES) throw new HttpError("answer headers too large");
          return null;
        }
        if (end > MAX_HEAD_BYTES) throw new HttpError("answer headers too large");
        const head = this.#buffer.subarray(0, end).toString("latin1");
        this.#buffer = this.#buffer.subarray(end + 4);
        if (this.#head(head)) continue; // an interim 1xx answer: the real one follows
        // #head() just set the mode (TypeScript still sees "head" here).
        const mode: string = this.#mode;
        if (mode === "length" && this.#length === 0) return this.#done();
      }
      if (this.#mode === "length") {
        if (this.#buffer.length < this.#length) return null;
        this.#chunks.push(this.#buffer.subarray(0, this.#length));
        this.#buffer = this.#buffer.subarray(this.#length);
        return this.#done();
      }
      if (this.#mode === "close") {
        this.#take(this.#buffer);
        this.#buffer = Buffer.alloc(0);
        return null;
      }
      // chunked: size line, data, CRLF; a zero size ends the body, then trailers and an empty line.
      const lineEnd = this.#buffer.indexOf("\r\n");
      if (lineEnd < 0) {
        if (this.#buffer.length > 1024) throw new HttpError("malformed chunk size");
        return null;
      }
      const sizeText = this.#buffer.subarray(0, lineEnd).toString("latin1").split(";")[0]?.trim() ?? "";
      if (!/^[0-9a-fA-F]{1,8}$/.test(sizeText)) throw new HttpError("malformed chunk size");
      const size = Number.parseInt(sizeText, 16);
      if (size === 0) {
        // "0\r\n", then trailer lines (usually none) and an empty line.
        const trailerEnd = this.#buffer.indexOf("\r\n\r\n", lineEnd);
        if (trailerEnd < 0) return null;
        this.#buffer = this.#buffer.subarray(trailerEnd + 4);
        return this.#done();
      }
      const dataStart = lineEnd + 2;
      if (this.#buffer.length < dataStart + size + 2) return null;
      if (this.#buffer[dataStart + size] !== 0x0d || this.#buffer[dataStart + size + 1] !== 0x0a) {
        throw new HttpError("malformed chunk");
      }
      this.#take(this.#buffer.subarray(dataStart, dataStart + size));
      this.#buffer = this.#buffer.subarray(dataStart + size + 2);
    }
  }

  /** For a body that runs until the connection closes: the answer at EOF (null otherwise). */
  finishAtClose(): HttpAnswer | null {
    if (this.#mode !== "close") return null;
    return { status: this.#status, body: Buffer.concat(this.#chunks) };
  }

  /** Parses a head; true when it was an interim (1xx) answer. */
  #head(head: string): boolean {
    const lines = head.split("\r\n");
    const status = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/.exec(lines[0] ?? "");
    if (!status) throw new HttpError("malformed status line");
    const code = Number(status[2]);
    if (code >= 100 && code < 200) {
      if (code === 101) throw new HttpError("unexpected protocol switch");
      return true;
    }
    this.#status = code;
    this.#keepAlive = status[1] === "1";
    let length: number | null = null;
    let chunked = false;
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      if (colon <= 0) throw new HttpError("malformed header line");
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === "content-length") {
        if (!/^\d{1,15}$/.test(value) || (length !== null && length !== Number(value))) {
          throw new HttpError("malformed Content-Length");
        }
        length = Number(value);
      } else if (name === "transfer-encoding") {
        if (value.toLowerCase() !== "chunked") throw new HttpError(`unsupported Transfer-Encoding ${value}`);
        chunked = true;
      } else if (name === "connection") {
        const tokens = value
          .toLowerCase()
          .split(",")
          .map((token) => token.trim());
        if (tokens.includes("close")) this.#keepAlive = false;
        else if (tokens.includes("keep-alive")) this.#keepAlive = true;
      }
    }
    if (chunked && length !== null) throw new HttpError("both Content-Length and chunked");
    if (code === 204 || code === 304) {
      this.#mode = "length";
      this.#length = 0;
    } else if (chunked) {
      this.#mode = "chunked";
    } else if (length !== null) {
      if (length > this.#maxBody) throw new HttpError(`answer larger than ${this.#maxBody} bytes`);
      this.#mode = "length";
      this.#length = length;
    } else {
      this.#mode = "close";
      this.#keepAlive = false;
    }
    return false;
  }

  #take(data: Buffer): void {
    this.#bodyBytes += data.length;
    if (this.#bodyBytes > this.#maxBody) throw new HttpError(`answer larger than ${this.#maxBody} bytes`);
    this.#chunks.push(data);
  }

  #done(): { status: number; body: Buffer; keepAlive: boolean; extra: boolean } {
    const body = this.#chunks.length === 1 ? (this.#chunks[0] as Buffer) : Buffer.concat(this.#chunks);
    return { status: this.#status, body, keepAlive: this.#keepAlive, extra: this.#buffer.length > 0 };
  }
}
