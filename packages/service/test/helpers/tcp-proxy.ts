import { connect, createServer, type Server, type Socket } from "node:net";

/** A TCP proxy that can be "stopped" (listener closed, every connection cut) and started again on its port. */
export class TcpProxy {
  readonly #target: { host: string; port: number };
  readonly #sockets = new Set<Socket>();
  #server: Server | null = null;
  #frozen = false;
  port = 0;

  constructor(target: { host: string; port: number }) {
    this.#target = target;
  }

  async start(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.#target);
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on("close", () => this.#sockets.delete(socket));
        socket.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
      if (this.#frozen) for (const socket of [client, upstream]) socket.pause();
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    this.port = typeof address === "object" && address ? address.port : 0;
    this.#server = server;
  }

  /** A network partition: connections stay open (new ones are accepted) but no byte passes. */
  freeze(): void {
    this.#frozen = true;
    for (const socket of this.#sockets) socket.pause();
  }

  /** The partition heals: everything held back is delivered, as TCP would after retransmission. */
  thaw(): void {
    this.#frozen = false;
    for (const socket of this.#sockets) socket.resume();
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = null;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    await closed;
  }
}
