/**
 * SIGTERM stops an instance within seconds: requests in flight are answered (with
 * `Connection: close`), idle keep-alive connections are closed at once, and the background worker
 * takes no new work from the moment the signal arrives. Before, an in-flight answer kept its
 * connection alive, the close waited for it (72 s keep-alive), and webhooks kept going out meanwhile.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { CryptoPool } from "../src/credentials/crypto-pool.ts";
import { openDatabase } from "../src/db/database.ts";
import { migrateToLatest } from "../src/db/migrate.ts";
import { createServices } from "../src/services.ts";
import { freshDatabaseUrl } from "./helpers/databases.ts";
import { byTest } from "./helpers/fixtures.ts";
import { type RunningService, startServiceProcess } from "./helpers/process.ts";
import { installationSecret } from "./helpers/service.ts";

const password = "correct horse battery staple";
/** Bounds the wait for the exit; the old behaviour took over a minute. Not a timing measurement. */
const exitDeadlineMs = 10000;

let dir: string;
let drop: () => Promise<void>;
let receiver: Server;
let receiverUrl: string;
const webhookHits: number[] = [];
let service: RunningService;
let tokens: { mta: string; mailboxServer: string };

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "mas-shutdown-"));
  const fresh = await freshDatabaseUrl(join(dir, "shutdown.sqlite"));
  drop = fresh.drop;
  // A webhook receiver that always fails: every delivery is retried each second, so the worker
  // is busy all the time.
  receiver = createServer((_request, response) => {
    webhookHits.push(Date.now());
    response.writeHead(500).end("no");
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const address = receiver.address();
  receiverUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/hook`;

  const database = await openDatabase(fresh.url);
  await migrateToLatest(database);
  const services = createServices(database, new CryptoPool(1), { installationSecret: installationSecret() });
  await services.domains.create("example.org");
  await services.webhooks.create({ url: receiverUrl, events: ["user.deleted"] });
  await services.users.create({ email: "alice@example.org", password, mailCrypt: false });
  for (let i = 0; i < 12; i++) {
    await services.users.create({ email: `gone${i}@example.org`, password, mailCrypt: false });
    await services.lifecycle.delete(`gone${i}@example.org`, byTest);
  }
  tokens = {
    mta: (await services.tokens.create("postfix", ["mta"])).plainToken,
    mailboxServer: (await services.tokens.create("dovecot", ["mailbox-server"])).plainToken,
  };
  await database.close();
  service = await startServiceProcess({
    DATABASE_URL: fresh.url,
    WEBHOOK_RETRY_DELAYS: Array(30).fill("1").join(","),
    CRYPTO_POOL_SIZE: "1",
  });
});

after(async () => {
  await service?.stop("SIGKILL");
  receiver?.close();
  await drop?.();
  rmSync(dir, { recursive: true, force: true });
});

function send(socket: Socket, method: string, path: string, token: string, json?: unknown): Promise<string> {
  const body = json === undefined ? "" : JSON.stringify(json);
  const head = [`${method} ${path} HTTP/1.1`, "Host: x", `Authorization: Bearer ${token}`];
  if (json !== undefined)
    head.push("Content-Type: application/json", `Content-Length: ${Buffer.byteLength(body)}`);
  const answer = new Promise<string>((resolve, reject) => {
    let text = "";
    const onData = (chunk: Buffer) => {
      text += chunk;
      const [headers = "", rest = ""] = text.split("\r\n\r\n");
      const length = Number(/content-length: (\d+)/i.exec(headers)?.[1] ?? -1);
      if (length >= 0 && Buffer.byteLength(rest) >= length) {
        socket.off("data", onData);
        resolve(text);
      }
    };
    socket.on("data", onData);
    socket.once("error", reject);
  });
  socket.write(`${head.join("\r\n")}\r\n\r\n${body}`);
  return answer;
}

const open = async (url: string) => {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise((resolve) => socket.once("connect", resolve));
  return socket;
};

test("SIGTERM: in-flight answers close their connection, idle ones close at once, exit 0 within seconds, no new webhook work", {
  timeout: 60000,
}, async () => {
  // The worker is at work.
  while (webhookHits.length < 12) await new Promise((resolve) => setTimeout(resolve, 50));

  // An idle keep-alive connection, as Postfix's and Dovecot's HTTP clients hold them.
  const idle = await open(service.url);
  const first = await send(idle, "GET", "/api/mta/mailbox/alice@example.org", tokens.mta);
  assert.match(first, /^HTTP\/1.1 200/);
  assert.match(first, /connection: keep-alive/i);
  const idleClosed = new Promise<number>((resolve) => idle.once("close", () => resolve(Date.now())));

  // A sign-in in flight (Argon2 takes a while) when the signal comes.
  const busy = await open(service.url);
  const inFlight = send(busy, "POST", "/api/mailbox-server/alice@example.org", tokens.mailboxServer, {
    password,
  });
  await new Promise((resolve) => setTimeout(resolve, 20));
  const exited = new Promise<number | null>((resolve) => service.child.once("exit", resolve));
  const signalledAt = Date.now();
  const hitsAtSignal = webhookHits.length;
  service.child.kill("SIGTERM");

  const answer = await inFlight;
  assert.match(answer, /^HTTP\/1.1 200/, "the request in flight is answered");
  assert.match(answer, /connection: close/i, "and its connection is closed with it");
  assert.ok((await idleClosed) - signalledAt < exitDeadlineMs, "the idle connection is closed");

  const code = await Promise.race([
    exited,
    new Promise<string>((resolve) => setTimeout(() => resolve("still running"), exitDeadlineMs)),
  ]);
  assert.equal(code, 0, service.output().slice(-2000));
  busy.destroy();
  // At most the deliveries already under way when the signal came (one batch of the worker).
  const later = webhookHits.length - hitsAtSignal;
  assert.ok(later <= 8, `${later} webhook attempts after SIGTERM`);
  const output = service.output();
  const afterShutdown = output.slice(output.indexOf('"msg":"shutting down"'));
  assert.ok((afterShutdown.match(/"msg":"webhook delivery failed/g) ?? []).length <= 8, afterShutdown);
});
