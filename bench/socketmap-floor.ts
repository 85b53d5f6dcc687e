/**
 * The floor for bench/postfix-adapter.ts: a socketmap-to-HTTP proxy with nothing but the two
 * sockets. Each client connection gets one connection to the service of its own; a request
 * becomes a GET, the answer is read by its Content-Length and turned into OK/NOTFOUND. No pool, no
 * time limit, no metrics, no checks: not something to run beside Postfix, only the least any
 * adapter process on Node must spend, so the benchmark can show how much of the hop's cost is the
 * adapter's own and how much is the extra process.
 *
 *   SERVICE_URL=http://127.0.0.1:8080 SERVICE_TOKEN=... node bench/socketmap-floor.ts
 *
 * Prints {"listening": "127.0.0.1:<port>"} on stdout once it listens (port 0: one is chosen).
 */
import { type AddressInfo, connect, createServer } from "node:net";

const service = new URL(process.env.SERVICE_URL ?? "");
const authorization = `Bearer ${process.env.SERVICE_TOKEN ?? ""}`;
const port = Number(service.port || 80);

const server = createServer({ noDelay: true }, (client) => {
  const upstream = connect({ host: service.hostname, port, noDelay: true });
  let input: Buffer = Buffer.alloc(0);
  let answer: Buffer = Buffer.alloc(0);
  let busy = false;
  const next = () => {
    if (busy) return;
    const colon = input.indexOf(0x3a);
    if (colon < 0) return;
    const end = colon + 1 + Number(input.toString("latin1", 0, colon));
    if (input.length <= end) return;
    const request = input.toString("utf8", colon + 1, end);
    input = input.subarray(end + 1);
    const space = request.indexOf(" ");
    busy = true;
    upstream.write(
      `GET /api/mta/${request.slice(0, space)}/${encodeURIComponent(request.slice(space + 1))} HTTP/1.1\r\n` +
        `host: ${service.host}\r\nauthorization: ${authorization}\r\naccept: application/json\r\n\r\n`,
    );
  };
  upstream.on("data", (chunk: Buffer) => {
    answer = answer.length === 0 ? chunk : Buffer.concat([answer, chunk]);
    const headEnd = answer.indexOf("\r\n\r\n");
    if (headEnd < 0) return;
    const head = answer.toString("latin1", 0, headEnd);
    const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (answer.length < headEnd + 4 + length) return;
    const body = answer.toString("utf8", headEnd + 4, headEnd + 4 + length);
    answer = answer.subarray(headEnd + 4 + length);
    let reply = "NOTFOUND ";
    if (head.startsWith("HTTP/1.1 200")) {
      const value: unknown = JSON.parse(body);
      if (value === true) reply = "OK 1";
      else if (Array.isArray(value) && value.length > 0) reply = `OK ${value.join(",")}`;
    }
    client.write(`${Buffer.byteLength(reply)}:${reply},`);
    busy = false;
    next();
  });
  client.on("data", (chunk: Buffer) => {
    input = input.length === 0 ? chunk : Buffer.concat([input, chunk]);
    next();
  });
  client.on("close", () => upstream.destroy());
  client.on("error", () => {});
  upstream.on("error", () => client.destroy());
});

const [host, listenPort] = (process.env.SOCKETMAP_LISTEN_ADDR ?? "127.0.0.1:0").split(":");
server.listen(Number(listenPort), host, () => {
  const address = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ listening: `${address.address}:${address.port}` })}\n`);
});
process.on("SIGTERM", () => process.exit(0));
