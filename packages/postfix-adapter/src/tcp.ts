/**
 * What the three protocol servers share: a TCP listener that counts its connections, bounds them,
 * drops idle ones, keeps one bad connection from touching the others, and closes gracefully.
 */
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import type { Logger } from "pino";
import type { ListenAddress } from "./config.ts";
import type { Metrics } from "./metrics.ts";

/** One client connection's protocol state, as the listener sees it. */
export interface Session {
  /** True while a request is being answered: shutdown waits for it. */
  readonly busy: boolean;
}

export interface ListenerOptions {
  name: "socketmap" | "sasl" | "policy";
  metrics: Metrics;
  logger: Logger;
  /** Connections beyond this are closed at once (a runaway client cannot exhaust descriptors). */
  maxConnections: number;
  /**
   * A connection without traffic for this long is closed (found by a sweep every quarter of it, at
   * most every minute, so up to that much later); null never (see sasl.ts).
   */
  idleTimeoutMs: number | null;
  open(socket: Socket): Session;
}

/** A connection as the idle sweep sees it. */
interface Tracked {
  session: Session;
  /** The socket's bytes read and written at the last sweep. */
  traffic: number;
  /** Date.now() of the sweep that last saw traffic (or the connection's start). */
  quietSince: number;
}

export class Listener {
  readonly server: Server;
  readonly name: ListenerOptions["name"];
  readonly #connections = new Map<Socket, Tracked>();
  readonly #options: ListenerOptions;
  /**
   * Idle connections are found by one timer looking at every socket's byte counts now and then,
   * not by a timer per socket: Node re-arms a socket's own timeout on each read and write, a cost
   * on every lookup.
   */
  #idleSweep: NodeJS.Timeout | null = null;

  constructor(options: ListenerOptions) {
    this.#options = options;
    this.name = options.name;
    this.server = createServer({ noDelay: true }, (socket) => this.#accept(socket));
    this.server.maxConnections = options.maxConnections;
    this.server.on("drop", () => {
      options.metrics.protocolErrors.inc({ listener: options.name, kind: "too-many-connections" });
    });
  }

  #accept(socket: Socket): void {
    const { metrics, logger, name, idleTimeoutMs } = this.#options;
    metrics.connections.inc({ listener: name });
    socket.on("error", (error) =>
      logger.debug({ listener: name, err: error.message }, "client connection error"),
    );
    socket.on("close", () => {
      this.#connections.delete(socket);
      metrics.connections.inc({ listener: name }, -1);
    });
    this.#connections.set(socket, {
      session: this.#options.open(socket),
      traffic: 0,
      quietSince: Date.now(),
    });
    if (idleTimeoutMs !== null && this.#idleSweep === null) {
      const every = Math.min(60_000, Math.max(50, Math.floor(idleTimeoutMs / 4)));
      this.#idleSweep = setInterval(() => this.#closeIdle(idleTimeoutMs), every);
      this.#idleSweep.unref();
    }
  }

  #closeIdle(idleTimeoutMs: number): void {
    const now = Date.now();
    for (const [socket, tracked] of this.#connections) {
      const traffic = socket.bytesRead + socket.bytesWritten;
      if (traffic !== tracked.traffic || tracked.session.busy) {
        tracked.traffic = traffic;
        tracked.quietSince = now;
      } else if (now - tracked.quietSince >= idleTimeoutMs) {
        socket.destroy();
      }
    }
  }

  listen(address: ListenAddress): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen({ host: address.host, port: address.port }, () => {
        this.server.off("error", reject);
        resolve(this.server.address() as AddressInfo);
      });
    });
  }

  /** Stops accepting, lets running requests finish (up to graceMs), then closes every connection. */
  async close(graceMs: number): Promise<void> {
    const closed = new Promise<void>((done) => this.server.close(() => done()));
    if (this.#idleSweep !== null) clearInterval(this.#idleSweep);
    this.#idleSweep = null;
    const deadline = Date.now() + graceMs;
    while ([...this.#connections.values()].some(({ session }) => session.busy) && Date.now() < deadline) {
      await new Promise((done) => setTimeout(done, 20));
    }
    for (const socket of this.#connections.keys()) socket.destroy();
    await closed;
  }
}
