/**
 * The bare-runtime baseline: node:http on the same Node, answering every request with one fixed
 * JSON body of the given size (the size of the endpoint's typical answer). Usage: port bodyBytes.
 */
import { createServer } from "node:http";

const port = Number(process.argv[2]);
const bytes = Math.max(Number(process.argv[3]), 20);
const prefix = '{"message":"';
const suffix = '"}';
const body = Buffer.from(`${prefix}${"x".repeat(bytes - prefix.length - suffix.length)}${suffix}`);

const server = createServer((request, response) => {
  // Drain a request body, if any, before answering, as a real server must.
  request.resume();
  response.writeHead(200, {
    "content-type": "application/json; charset=utf-8",
    "content-length": body.length,
  });
  response.end(body);
});
server.keepAliveTimeout = 72_000;
server.listen(port, "127.0.0.1", () => process.stdout.write("ready\n"));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
