/**
 * Test support: the real account service (in this process, on a free port, over an SQLite file),
 * a TCP proxy in front of it that can be "stopped" and that records what passes, the adapter as a
 * real child process (bin/postfix-adapter), and small clients speaking each protocol over real
 * sockets. Not a test file itself.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join, resolve } from "node:path";
import { startService, type TestService } from "../../service/test/helpers/service.ts";

export const repoRoot = resolve(import.meta.dirname, "../../..");
export const adapterBin = join(repoRoot, "bin", "postfix-adapter");
export const password = "correct horse battery staple";

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

/** Polls until `check` returns something truthy; fails after the deadline with `what`. */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 10_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ""}`,
      );
    }
    await sleep(25);
  }
}

// ------------------------------------------------------------------------------------------------
// The service, with the accounts every test file uses

/**
 * A raw HTTP server on a free port: `onRequest` gets each request's head and body (read by its
 * Content-Length) and the socket, and writes whatever bytes it likes, as the service, a proxy in
 * front of it or a broken server could. Close it with `server.close()`.
 */
export async function scriptedHttpServer(
  onRequest: (head: string, body: string, socket: Socket, count: number) => void,
): Promise<{ server: Server; url: URL; sockets: Set<Socket>; requests: () => number }> {
  let count = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    let buffer = "";
    socket.setEncoding("latin1");
    socket.on("error", () => {});
    socket.on("data", (chunk: string) => {
      buffer += chunk;
      for (;;) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffer.slice(0, end);
        const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.length < end + 4 + length) return;
        const body = buffer.slice(end + 4, end + 4 + length);
        buffer = buffer.slice(end + 4 + length);
        count += 1;
        onRequest(head, body, socket, count);
      }
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()));
  const port = (server.address() as { port: number }).port;
  return { server, url: new URL(`http://127.0.0.1:${port}`), sockets, requests: () => count };
}

export interface Service {
  service: TestService;
  token: string;
  /** The proxy the adapters talk to (SERVICE_URL); stop() makes the service unreachable. */
  proxy: TcpProxy;
  url: string;
  close(): Promise<void>;
}

/**
 * The service with domain example.org: users alice (per_hour 3), bob (no own limits, settings'
 * defaults), spam (ROLE_SPAM), change (password change required); alias team@ -> alice, bob;
 * alias info@ owned by alice. `domain` picks another domain name (Redis tests share a server
 * between runs and keep their keys apart that way).
 */
export async function startAccounts(domain = "example.org"): Promise<Service> {
  const service = await startService();
  const { domains, users, aliases } = service.services;
  await domains.create(domain);
  await users.create({ email: `alice@${domain}`, password, mailCrypt: false, smtpQuota: { per_hour: 3 } });
  await users.create({ email: `bob@${domain}`, password, mailCrypt: false });
  await users.create({ email: `spam@${domain}`, password, mailCrypt: false, roles: ["ROLE_SPAM"] });
  await users.create({ email: `change@${domain}`, password, mailCrypt: false, passwordChangeRequired: true });
  await aliases.create({ source: `team@${domain}`, destinations: [`alice@${domain}`, `bob@${domain}`] });
  await aliases.create({ source: `info@${domain}`, owner: `alice@${domain}` });
  const token = await service.token("mta");
  const port = Number(new URL(service.url).port);
  const proxy = new TcpProxy(port);
  await proxy.start();
  return {
    service,
    token,
    proxy,
    url: `http://127.0.0.1:${proxy.port}`,
    async close() {
      await proxy.stop();
      await service.close();
    },
  };
}

/**
 * A TCP proxy to the service. stop() closes its listener and cuts every connection through it (the
 * service "goes away" for the adapter); start() opens it again on the same port. Every byte sent
 * to the service is kept in `sent`, so a test can see the headers the adapter sent.
 */
export class TcpProxy {
  readonly #target: number;
  readonly #sockets = new Set<Socket>();
  #server: Server | null = null;
  port = 0;
  sent = "";

  constructor(targetPort: number) {
    this.#target = targetPort;
  }

  async start(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect({ host: "127.0.0.1", port: this.#target });
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on("close", () => this.#sockets.delete(socket));
        socket.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.on("data", (chunk: Buffer) => {
        this.sent += chunk.toString("latin1");
      });
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((done, fail) => {
      server.once("error", fail);
      server.listen(this.port, "127.0.0.1", () => done());
    });
    const address = server.address();
    this.port = typeof address === "object" && address ? address.port : 0;
    this.#server = server;
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = null;
    for (const socket of this.#sockets) socket.destroy();
    if (server) await new Promise<void>((done) => server.close(() => done()));
  }
}

// ------------------------------------------------------------------------------------------------
// The adapter

const levelNames: Record<number, string> = { 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal" };

export interface LogLine {
  level: string;
  msg: string;
  [key: string]: unknown;
}

export interface Ports {
  socketmap: number;
  sasl: number;
  policy: number;
  metrics: number;
}

export interface Adapter {
  process: ChildProcess;
  ports: Ports;
  logs: LogLine[];
  output(): string;
  waitForLog(what: string, match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const running = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of running) child.kill("SIGKILL");
});

/** Starts bin/postfix-adapter with every listener on a free port and waits for "listening". */
export async function startAdapter(env: Record<string, string>): Promise<Adapter> {
  const child = spawn(adapterBin, [], {
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      SOCKETMAP_LISTEN_ADDR: "127.0.0.1:0",
      SASL_LISTEN_ADDR: "127.0.0.1:0",
      POLICY_LISTEN_ADDR: "127.0.0.1:0",
      METRICS_LISTEN_ADDR: "127.0.0.1:0",
      LOG_LEVEL: "debug",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  const logs: LogLine[] = [];
  let output = "";
  let pending = "";
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    output += chunk;
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const line of lines) {
      try {
        const entry = JSON.parse(line) as LogLine & { level: string | number };
        if (typeof entry.level === "number") entry.level = levelNames[entry.level] ?? String(entry.level);
        logs.push(entry as LogLine);
      } catch {
        logs.push({ level: "unparsed", msg: line });
      }
    }
  });
  child.stderr.on("data", (chunk: string) => {
    output += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => {
    child.on("exit", (code, signal) => {
      running.delete(child);
      done({ code, signal });
    });
  });
  const waitForLog = (what: string, match: (line: LogLine) => boolean, timeoutMs = 10_000) =>
    waitFor(what, () => logs.find(match), timeoutMs);
  const listening = await Promise.race([
    waitForLog("the adapter to listen", (line) => line.msg === "listening", 20_000),
    exited.then(({ code }) => {
      throw new Error(`adapter exited with ${code} before listening:\n${output}`);
    }),
  ]);
  const port = (name: string) => {
    const value = listening[name];
    return typeof value === "string" && value !== "off" ? Number(value.slice(value.lastIndexOf(":") + 1)) : 0;
  };
  return {
    process: child,
    ports: {
      socketmap: port("socketmap"),
      sasl: port("sasl"),
      policy: port("policy"),
      metrics: port("metrics"),
    },
    logs,
    output: () => output,
    waitForLog,
    stop: async (signal: NodeJS.Signals = "SIGTERM") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

// ------------------------------------------------------------------------------------------------
// Protocol clients over real sockets

/** A TCP connection that collects what it receives, for reading replies with a deadline. */
export class Connection {
  readonly socket: Socket;
  received: Buffer = Buffer.alloc(0);
  ended = false;
  readonly closed: Promise<void>;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on("data", (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
    });
    socket.on("error", () => {});
    this.closed = new Promise((done) =>
      socket.on("close", () => {
        this.ended = true;
        done();
      }),
    );
  }

  static open(port: number): Promise<Connection> {
    return new Promise((done, fail) => {
      const socket = connect({ host: "127.0.0.1", port }, () => done(new Connection(socket)));
      socket.once("error", fail);
    });
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Waits until `take` finds a complete message at the start of what was received, and removes it. */
  async read<T>(
    what: string,
    take: (data: Buffer) => { value: T; length: number } | null,
    timeoutMs = 10_000,
  ): Promise<T> {
    const found = await waitFor(
      what,
      () => {
        const taken = take(this.received);
        if (taken) return taken;
        if (this.ended)
          throw new Error(`connection closed; received so far: ${JSON.stringify(this.received.toString())}`);
        return null;
      },
      timeoutMs,
    );
    this.received = this.received.subarray(found.length);
    return found.value;
  }

  /** Resolves true when the server closes the connection within the time. */
  async closedWithin(ms: number): Promise<boolean> {
    return Promise.race([this.closed.then(() => true), sleep(ms).then(() => false)]);
  }

  close(): void {
    this.socket.destroy();
  }
}

export function netstring(text: string): Buffer {
  const payload = Buffer.from(text, "utf8");
  return Buffer.concat([Buffer.from(`${payload.length}:`), payload, Buffer.from(",")]);
}

function takeNetstring(data: Buffer): { value: string; length: number } | null {
  const colon = data.indexOf(0x3a);
  if (colon < 0) return null;
  const length = Number(data.subarray(0, colon).toString());
  const end = colon + 1 + length;
  if (data.length <= end) return null;
  if (data[end] !== 0x2c) throw new Error(`not a netstring: ${JSON.stringify(data.toString())}`);
  return { value: data.subarray(colon + 1, end).toString("utf8"), length: end + 1 };
}

export class SocketmapClient {
  readonly connection: Connection;
  constructor(connection: Connection) {
    this.connection = connection;
  }
  static async open(port: number): Promise<SocketmapClient> {
    return new SocketmapClient(await Connection.open(port));
  }
  async query(map: string, key: string): Promise<string> {
    this.connection.write(netstring(`${map} ${key}`));
    return this.reply();
  }
  reply(): Promise<string> {
    return this.connection.read("a socketmap reply", takeNetstring);
  }
  close(): void {
    this.connection.close();
  }
}

export class PolicyClient {
  readonly connection: Connection;
  constructor(connection: Connection) {
    this.connection = connection;
  }
  static async open(port: number): Promise<PolicyClient> {
    return new PolicyClient(await Connection.open(port));
  }
  /** Sends one request (Postfix's attribute set for the stage, with these overrides) and reads the action. */
  async ask(attributes: Record<string, string>): Promise<string> {
    this.connection.write(policyRequest(attributes));
    return this.reply();
  }
  reply(): Promise<string> {
    return this.connection.read("a policy reply", (data) => {
      const text = data.toString("utf8");
      const end = text.indexOf("\n\n");
      if (end < 0) return null;
      return { value: text.slice(0, end), length: Buffer.byteLength(text.slice(0, end + 2)) };
    });
  }
  close(): void {
    this.connection.close();
  }
}

/** A request as Postfix 3.7 sends it at RCPT (most attributes), with overrides. */
export function policyRequest(attributes: Record<string, string>): string {
  const base: Record<string, string> = {
    request: "smtpd_access_policy",
    protocol_state: "RCPT",
    protocol_name: "ESMTP",
    client_address: "192.0.2.10",
    client_name: "client.example.net",
    client_port: "50123",
    reverse_client_name: "client.example.net",
    server_address: "192.0.2.1",
    server_port: "587",
    helo_name: "laptop",
    sender: "alice@example.org",
    recipient: "friend@example.net",
    recipient_count: "0",
    queue_id: "",
    instance: "1a2b.6791a2b3.c4d5.0",
    size: "0",
    etrn_domain: "",
    stress: "",
    sasl_method: "PLAIN",
    sasl_username: "",
    sasl_sender: "",
    ccert_subject: "",
    ccert_issuer: "",
    ccert_fingerprint: "",
    ccert_pubkey_fingerprint: "",
    encryption_protocol: "TLSv1.3",
    encryption_cipher: "TLS_AES_256_GCM_SHA384",
    encryption_keysize: "256",
    policy_context: "",
    compatibility_level: "3.6",
    mail_version: "3.7.11",
    ...attributes,
  };
  return `${Object.entries(base)
    .map(([name, value]) => `${name}=${value}`)
    .join("\n")}\n\n`;
}

/** The client side of Dovecot's auth protocol, as Postfix's smtpd speaks it. */
export class SaslClient {
  readonly connection: Connection;
  /** The server's handshake lines, VERSION to DONE. */
  handshake: string[] = [];
  private constructor(connection: Connection) {
    this.connection = connection;
  }

  static async open(port: number, options: { handshake?: boolean } = {}): Promise<SaslClient> {
    const client = new SaslClient(await Connection.open(port));
    for (;;) {
      const line = await client.line();
      client.handshake.push(line);
      if (line === "DONE") break;
    }
    if (options.handshake !== false) client.connection.write(`VERSION\t1\t0\nCPID\t${process.pid}\n`);
    return client;
  }

  line(): Promise<string> {
    return this.connection.read("a SASL line", (data) => {
      const end = data.indexOf(0x0a);
      return end < 0 ? null : { value: data.subarray(0, end).toString("utf8"), length: end + 1 };
    });
  }

  send(line: string): void {
    this.connection.write(`${line}\n`);
  }

  close(): void {
    this.connection.close();
  }
}

export function b64(text: string): string {
  return Buffer.from(text, "utf8").toString("base64");
}
