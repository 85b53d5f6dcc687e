import { createServer, type IncomingHttpHeaders, type Server } from "node:http";

export interface ReceivedWebhook {
  body: Buffer;
  headers: IncomingHttpHeaders;
  at: number;
}

/** A real local HTTP server that records webhook deliveries; `respond` decides each answer's status. */
export interface Receiver {
  url: string;
  received: ReceivedWebhook[];
  respond: (delivery: ReceivedWebhook, index: number) => number;
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedWebhook[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: ReceivedWebhook[] = [];
  const receiver: Partial<Receiver> = { received, respond: () => 200 };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const delivery = { body: Buffer.concat(chunks), headers: req.headers, at: Date.now() };
      received.push(delivery);
      res.statusCode = (receiver.respond as Receiver["respond"])(delivery, received.length - 1);
      res.end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${port}/hook`,
    async waitFor(count: number, timeoutMs = 15000) {
      const deadline = Date.now() + timeoutMs;
      while (received.length < count) {
        if (Date.now() > deadline) throw new Error(`expected ${count} deliveries, got ${received.length}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      return received;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }) as Receiver;
}
