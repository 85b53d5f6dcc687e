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
  /** An idle connection is closed after this long; null never (see sasl.ts). */
  idleTimeoutMs: number | null;
  open(socket: Socket): Session;
}

export class Listener {
  readonly server: Server;
  readonly name: ListenerOptions["name"];
  readonly #sessions = new Map<Socket, Session>();
  readonly #options: ListenerOptions;

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
      this.#sessions.delete(socket);
      metrics.connections.inc({ listener: name }, -1);
    });
    if (idleTimeoutMs !== null) {
      socket.setTimeout(idleTimeoutMs, () => {
        if (!this.#sessions.get(socket)?.busy) socket.destroy();
      });
    }
    this.#sessions.set(socket, this.#options.open(socket));
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
    const deadline = Date.now() + graceMs;
    while ([...this.#sessions.values()].some((session) => session.busy) && Date.now() < deadline) {
      await new Promise((done) => setTimeout(done, 20));
    }
    for (const socket of this.#sessions.keys()) socket.destroy();
    await closed;
  }
}
