/**
 * A whole mail host on this machine for the end-to-end tests: the real service (SQLite), Debian's
 * Dovecot and Postfix started from configurations generated into a temporary directory (never
 * /etc), the shipped Dovecot adapter and snippets (contrib/dovecot), the Postfix adapter
 * (bin/postfix-adapter) and the mailbox janitor (bin/mailbox-janitor), all on free local ports.
 *
 * Dovecot and Postfix start as root, as on a mail server, and drop to their own users (dovecot,
 * dovenull, postfix); the mail is stored as `nobody`.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer, request as httpRequest, type IncomingMessage, type Server } from "node:http";
import { connect } from "node:net";
import { join } from "node:path";
import { freePort, repoRoot } from "../helpers/process.ts";

export { freePort, repoRoot };

/** uid and gid of `nobody`, the owner of the test's mail storage. */
export const NOBODY = { uid: 65534, gid: 65534 };

export const PASSWORD = "correct horse battery staple";

/** Why this machine cannot run a mail host (null when it can). */
export function missingPrerequisite(binaries: string[]): string | null {
  if (process.getuid?.() !== 0)
    return "Dovecot and Postfix start as root (run the tests as root, as CI does)";
  for (const binary of binaries) {
    if (!existsSync(binary)) {
      return `${binary} is missing (apt-get install postfix dovecot-core dovecot-imapd dovecot-lmtpd dovecot-auth-lua lua-cjson dovecot-sieve, as .ci/run does)`;
    }
  }
  for (const user of ["dovecot", "dovenull", "postfix"]) {
    if (spawnSync("id", ["-u", user]).status !== 0) return `the system user ${user} is missing`;
  }
  return null;
}

export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await check();
    if (result !== undefined && result !== null && result !== false) return result;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

export function waitForPort(what: string, port: number, timeoutMs = 20_000): Promise<boolean> {
  return waitFor(`${what} on port ${port}`, () => portOpen(port), timeoutMs);
}

/** A temporary directory the unprivileged mail users can traverse (mkdtemp makes it 0700). */
export function hostDirectory(parent = "/tmp", prefix = "mail-host-"): string {
  const dir = mkdtempSync(join(parent, prefix));
  chmodSync(dir, 0o755);
  return dir;
}

function run(command: string, args: string[], options: { input?: string } = {}) {
  const result = spawnSync(command, args, { encoding: "utf8", timeout: 60_000, input: options.input ?? "" });
  return { status: result.status ?? -1, stdout: result.stdout ?? "", stderr: result.stderr ?? "" };
}

function stopChild(
  child: ChildProcess,
  signal: NodeJS.Signals = "SIGTERM",
  timeoutMs = 10_000,
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
}

// ---------------------------------------------------------------------------------------------
// The service

export class ServiceProcess {
  private child: ChildProcess | null = null;
  private log = "";
  readonly url: string;
  readonly port: number;
  private readonly env: Record<string, string>;

  private constructor(port: number, env: Record<string, string>) {
    this.port = port;
    this.env = env;
    this.url = `http://127.0.0.1:${port}`;
  }

  /** The service on a port of its own that survives restarts (the adapters keep pointing at it). */
  static async start(env: Record<string, string>): Promise<ServiceProcess> {
    const service = new ServiceProcess(await freePort(), env);
    await service.start();
    return service;
  }

  output(): string {
    return this.log;
  }

  async start(): Promise<void> {
    const child = spawn(`${repoRoot}node_modules/.bin/node`, [`${repoRoot}packages/service/src/main.ts`], {
      env: { ...process.env, LOG_LEVEL: "warn", ...this.env, LISTEN_ADDR: `127.0.0.1:${this.port}` },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout?.on("data", (chunk) => (this.log += chunk));
    child.stderr?.on("data", (chunk) => (this.log += chunk));
    this.child = child;
    await waitFor(
      "the service",
      async () => {
        if (child.exitCode !== null) throw new Error(`service exited: ${this.log}`);
        try {
          return (await fetch(`${this.url}/health`)).status === 200;
        } catch {
          return false;
        }
      },
      30_000,
    );
  }

  async stop(): Promise<void> {
    if (this.child) await stopChild(this.child);
    this.child = null;
  }
}

export interface ApiAnswer {
  status: number;
  body: any;
}

export async function api(
  url: string,
  token: string,
  method: string,
  path: string,
  json?: unknown,
): Promise<ApiAnswer> {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(json === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(json === undefined ? {} : { body: JSON.stringify(json) }),
  });
  const text = await response.text();
  let body: unknown;
  try {
    body = text === "" ? undefined : JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: response.status, body };
}

/** A first admin token from the console (as an operator makes one), then the rest over the admin API. */
export function consoleAdminToken(databaseUrl: string): string {
  const result = spawnSync(
    `${repoRoot}bin/console`,
    ["app:api-token:create", "--name", "mail-host admin", "--scopes", "admin"],
    {
      env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: "silent" },
      encoding: "utf8",
      timeout: 60_000,
    },
  );
  const token = /^Token: ([0-9a-f]{64})$/m.exec(result.stdout ?? "")?.[1];
  assert.ok(token, `console did not print a token: ${result.stdout}${result.stderr}`);
  return token;
}

export async function createToken(url: string, admin: string, name: string, scope: string): Promise<string> {
  const answer = await api(url, admin, "POST", "/api/admin/api-tokens", { name, scopes: [scope] });
  assert.equal(answer.status, 201, JSON.stringify(answer.body));
  return answer.body.token as string;
}

// ---------------------------------------------------------------------------------------------
// A recording HTTP gateway in front of the service, for what the service cannot be made to do on
// demand: answer 500, or not answer at all.

/**
 * `error500`: 500 once the request's body is in, as the service's own faults come (an answer made
 * before an announced body is another case: http/announced-body.ts); `hang`: no answer.
 */
export type GatewayMode = "pass" | "error500" | "hang";

export interface Gateway {
  url: string;
  mode: GatewayMode;
  /** Requests seen: method, path and headers. */
  seen: { method: string; path: string; headers: IncomingMessage["headers"] }[];
  close(): Promise<void>;
}

export async function startGateway(target: string): Promise<Gateway> {
  const held = new Set<import("node:http").ServerResponse>();
  const gateway: Gateway = { url: "", mode: "pass", seen: [], close: async () => {} };
  const server: Server = createServer((incoming, outgoing) => {
    gateway.seen.push({ method: incoming.method ?? "", path: incoming.url ?? "", headers: incoming.headers });
    if (gateway.mode === "error500") {
      incoming.resume();
      incoming.once("end", () => {
        outgoing.writeHead(500, { "content-type": "application/json" });
        outgoing.end('{"message":"internal error"}');
      });
      return;
    }
    if (gateway.mode === "hang") {
      incoming.resume();
      held.add(outgoing);
      return;
    }
    const upstream = httpRequest(
      `${target}${incoming.url ?? "/"}`,
      { method: incoming.method, headers: incoming.headers },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    // The service down: the gateway goes down with it (the connection closes without an answer).
    upstream.on("error", () => outgoing.socket?.destroy());
    incoming.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  gateway.url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  gateway.close = async () => {
    for (const response of held) response.socket?.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return gateway;
}

// ---------------------------------------------------------------------------------------------
// Dovecot

export type Generation = "2.3" | "2.4";

export interface DovecotOptions {
  generation: Generation;
  /** Where the instance's files go (inside `root` for a chroot). */
  dir: string;
  /** A Debian 13 tree to run Dovecot 2.4 in with chroot; "" runs the system's Dovecot. */
  root?: string;
  serviceUrl: string;
  token: string;
  timeout?: string;
  /** Postfix's port for Sieve redirects (2.3). */
  submissionPort?: number;
  /** Ports chosen beforehand (Postfix is configured with the LMTP port before Dovecot starts). */
  imapPort?: number;
  lmtpPort?: number;
}

export interface Dovecot {
  imapPort: number;
  lmtpPort: number;
  /** The configuration file, as seen by Dovecot (inside the chroot for 2.4). */
  config: string;
  /** Path of the mail storage on this machine. */
  mailRoot: string;
  log(): string;
  /** doveadm against this instance (runs in the chroot for 2.4). */
  doveadm(args: string[]): { status: number; stdout: string; stderr: string };
  stop(): Promise<void>;
}

/** The shipped snippet with the paths of this instance instead of /etc/dovecot and /var/vmail. */
function snippet(generation: Generation, lua: string, mail: string): string {
  const text = readFileSync(`${repoRoot}contrib/dovecot/dovecot-${generation}.conf`, "utf8");
  const rewritten = text
    .replaceAll("/etc/dovecot/mail-account-service.lua", lua)
    .replaceAll("/var/vmail", mail)
    .replace(/^mail_uid = vmail$/m, "mail_uid = nobody")
    .replace(/^mail_gid = vmail$/m, "mail_gid = nogroup");
  for (const expected of [lua, mail, "mail_uid = nobody", "mail_gid = nogroup"]) {
    assert.ok(
      rewritten.includes(expected),
      `contrib/dovecot/dovecot-${generation}.conf changed: ${expected} not set`,
    );
  }
  return rewritten;
}

export async function startDovecot(options: DovecotOptions): Promise<Dovecot> {
  const root = options.root ?? "";
  const inside = options.dir; // the path Dovecot sees
  const outside = `${root}${inside}`; // the same path from here
  for (const sub of ["run", "state", "etc", "mail"]) mkdirSync(join(outside, sub), { recursive: true });
  chmodSync(outside, 0o755);
  chownSync(join(outside, "mail"), NOBODY.uid, NOBODY.gid);
  const imapPort = options.imapPort ?? (await freePort());
  const lmtpPort = options.lmtpPort ?? (await freePort());
  const lua = `${inside}/etc/mail-account-service.lua`;
  writeFileSync(
    `${outside}/etc/mail-account-service.lua`,
    readFileSync(`${repoRoot}contrib/dovecot/mail-account-service.lua`),
  );
  writeFileSync(
    `${outside}/etc/mail-account-service.conf`,
    snippet(options.generation, lua, `${inside}/mail`),
  );
  const instance = `mail-host-${randomBytes(4).toString("hex")}`;
  const common = [
    `base_dir = ${inside}/run`,
    `state_dir = ${inside}/state`,
    `instance_name = ${instance}`,
    `log_path = ${inside}/dovecot.log`,
    "protocols = imap lmtp",
    "listen = 127.0.0.1",
    "ssl = no",
    // No growing delays between the tests' deliberate failures; the service throttles on its own.
    "auth_failure_delay = 0",
    // The test's IMAP client may give the address of the client it stands for (ID x-originating-ip).
    "login_trusted_networks = 127.0.0.0/8",
    "default_internal_user = dovecot",
    "default_login_user = dovenull",
    "postmaster_address = postmaster@example.org",
  ];
  const listener = options.generation === "2.4" ? "listen" : "address";
  const services = [
    "service imap-login {",
    `  inet_listener imap {\n    ${listener} = 127.0.0.1\n    port = ${imapPort}\n  }`,
    "  inet_listener imaps {\n    port = 0\n  }",
    "}",
    "service lmtp {",
    `  inet_listener lmtp {\n    ${listener} = 127.0.0.1\n    port = ${lmtpPort}\n  }`,
    "}",
  ];
  const config =
    options.generation === "2.4"
      ? [
          "dovecot_config_version = 2.4.0",
          "dovecot_storage_version = 2.4.0",
          ...common,
          "auth_allow_cleartext = yes",
          ...services,
          "namespace inbox {\n  inbox = yes\n  separator = /\n}",
          `!include ${inside}/etc/mail-account-service.conf`,
        ]
      : [
          ...common,
          "disable_plaintext_auth = no",
          ...(options.submissionPort ? [`submission_host = 127.0.0.1:${options.submissionPort}`] : []),
          ...services,
          "namespace inbox {\n  inbox = yes\n}",
          `!include ${inside}/etc/mail-account-service.conf`,
        ];
  writeFileSync(`${outside}/dovecot.conf`, `${config.join("\n")}\n`);

  const command = root === "" ? ["/usr/sbin/dovecot"] : ["/usr/sbin/chroot", root, "/usr/sbin/dovecot"];
  const env = {
    PATH: "/usr/sbin:/usr/bin:/sbin:/bin",
    SERVICE_URL: options.serviceUrl,
    SERVICE_TOKEN: options.token,
    SERVICE_TIMEOUT: options.timeout ?? "",
  };
  const [binary, ...args] = command as [string, ...string[]];
  let output = "";
  const child = spawn(binary, [...args, "-F", "-c", `${inside}/dovecot.conf`], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  const log = () =>
    existsSync(`${outside}/dovecot.log`) ? readFileSync(`${outside}/dovecot.log`, "utf8") : "";
  await waitFor(
    `Dovecot ${options.generation}`,
    async () => {
      if (child.exitCode !== null) throw new Error(`Dovecot exited: ${output}${log()}`);
      return (await portOpen(imapPort)) && (await portOpen(lmtpPort));
    },
    30_000,
  );
  return {
    imapPort,
    lmtpPort,
    config: `${inside}/dovecot.conf`,
    mailRoot: `${outside}/mail`,
    log,
    doveadm: (doveadmArgs) =>
      root === ""
        ? run("/usr/bin/doveadm", ["-c", `${inside}/dovecot.conf`, ...doveadmArgs])
        : run("/usr/sbin/chroot", [root, "/usr/bin/doveadm", "-c", `${inside}/dovecot.conf`, ...doveadmArgs]),
    stop: () => stopChild(child),
  };
}

// ---------------------------------------------------------------------------------------------
// The Postfix adapter, the janitor

export interface Program {
  output(): string;
  stop(): Promise<void>;
}

function startProgram(path: string, env: Record<string, string>): { child: ChildProcess; program: Program } {
  let output = "";
  const child = spawn(path, [], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  return { child, program: { output: () => output, stop: () => stopChild(child) } };
}

export interface Adapter extends Program {
  socketmapPort: number;
  saslPort: number;
  policyPort: number;
}

export async function startAdapter(serviceUrl: string, token: string): Promise<Adapter> {
  const [socketmapPort, saslPort, policyPort] = [await freePort(), await freePort(), await freePort()];
  const { child, program } = startProgram(`${repoRoot}bin/postfix-adapter`, {
    SERVICE_URL: serviceUrl,
    SERVICE_TOKEN: token,
    SOCKETMAP_LISTEN_ADDR: `127.0.0.1:${socketmapPort}`,
    SASL_LISTEN_ADDR: `127.0.0.1:${saslPort}`,
    POLICY_LISTEN_ADDR: `127.0.0.1:${policyPort}`,
    METRICS_LISTEN_ADDR: "off",
    SERVICE_TIMEOUT: "2s",
    LOG_LEVEL: "info",
  });
  await waitFor("the Postfix adapter", async () => {
    if (child.exitCode !== null) throw new Error(`postfix-adapter exited: ${program.output()}`);
    return (await portOpen(socketmapPort)) && (await portOpen(saslPort)) && (await portOpen(policyPort));
  });
  return { ...program, socketmapPort, saslPort, policyPort };
}

export interface Janitor extends Program {
  url: string;
  csv: string;
}

export async function startJanitor(dir: string, env: Record<string, string>): Promise<Janitor> {
  const port = await freePort();
  mkdirSync(dir, { recursive: true });
  const csv = join(dir, "mailboxes.csv");
  const { child, program } = startProgram(`${repoRoot}bin/mailbox-janitor`, {
    LISTEN_ADDR: `127.0.0.1:${port}`,
    PURGER_DATABASE_PATH: csv,
    LOG_LEVEL: "info",
    ...env,
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor("the janitor", async () => {
    if (child.exitCode !== null) throw new Error(`janitor exited: ${program.output()}`);
    try {
      return (await fetch(`${url}/health`)).status === 200;
    } catch {
      return false;
    }
  });
  return { ...program, url, csv };
}

// ---------------------------------------------------------------------------------------------
// Postfix

export interface PostfixOptions {
  dir: string;
  adapter: Adapter;
  lmtpPort: number;
  /** Port of the incoming smtpd (chosen beforehand when Dovecot needs it first). */
  smtpPort?: number;
}

export interface Postfix {
  smtpPort: number;
  submissionPort: number;
  configDir: string;
  log(): string;
  /** `postmap -q key socketmap:inet:...:map`: exit status, what it printed, its warnings. */
  postmap(key: string, map: string): { status: number; stdout: string; stderr: string };
  postsuper(args: string[]): { status: number; stdout: string; stderr: string };
  stop(): Promise<void>;
}

/** Senders whose incoming mail Postfix puts on hold (the tests release it when they choose). */
export const HELD_SENDER = "held@sender.test";

/** A shipped contrib/postfix file with the test's ports; each replaced text must be there. */
function contribPostfix(file: string, replacements: [string, string][]): string {
  let text = readFileSync(`${repoRoot}contrib/postfix/${file}`, "utf8");
  for (const [from, to] of replacements) {
    assert.ok(text.includes(from), `contrib/postfix/${file} changed: "${from}" not found`);
    text = text.replaceAll(from, to);
  }
  return text;
}

/**
 * Postfix from the shipped main.cf and master.cf lines (contrib/postfix) with this host's ports,
 * after the lines any Postfix needs (directories, names, a self-signed certificate for STARTTLS)
 * and a few of the test's own: nothing leaves the machine, deferred mail is retried within
 * seconds, and mail from HELD_SENDER waits on hold.
 */
export async function startPostfix(options: PostfixOptions): Promise<Postfix> {
  const { dir, adapter } = options;
  const configDir = join(dir, "etc");
  for (const sub of ["etc", "queue", "data"]) mkdirSync(join(dir, sub), { recursive: true });
  chmodSync(dir, 0o755);
  chownSync(join(dir, "data"), Number(run("id", ["-u", "postfix"]).stdout.trim()), 0);
  const certificate = run("openssl", [
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=mx.mail-host.test",
    "-keyout",
    `${configDir}/key.pem`,
    "-out",
    `${configDir}/cert.pem`,
  ]);
  assert.equal(certificate.status, 0, certificate.stderr);
  const smtpPort = options.smtpPort ?? (await freePort());
  const submissionPort = await freePort();
  const ports: [string, string][] = [
    ["127.0.0.1:10001", `127.0.0.1:${adapter.socketmapPort}`],
    ["127.0.0.1:10002", `127.0.0.1:${adapter.saslPort}`],
    ["127.0.0.1:10003", `127.0.0.1:${adapter.policyPort}`],
  ];
  const main = [
    "compatibility_level = 3.6",
    `queue_directory = ${dir}/queue`,
    `data_directory = ${dir}/data`,
    "mail_owner = postfix",
    "setgid_group = postdrop",
    `maillog_file = ${dir}/postfix.log`,
    `maillog_file_prefixes = ${dir}`,
    "myhostname = mx.mail-host.test",
    "mydomain = mail-host.test",
    "mydestination =",
    "inet_interfaces = 127.0.0.1",
    "inet_protocols = ipv4",
    "mynetworks = 127.0.0.1/32",
    "alias_maps =",
    "alias_database =",
    "biff = no",
    `smtpd_tls_cert_file = ${configDir}/cert.pem`,
    `smtpd_tls_key_file = ${configDir}/key.pem`,
    // Nothing leaves this machine: mail for other domains fails here instead of being sent.
    "smtp_dns_support_level = disabled",
    "default_transport = error:no mail leaves the test host",
    "relay_transport = error:no mail leaves the test host",
    // Deferred mail is retried at once (the outage test restarts the service and waits for it).
    "queue_run_delay = 1s",
    "minimal_backoff_time = 1s",
    "maximal_backoff_time = 2s",
    `smtpd_sender_restrictions = check_sender_access inline:{${HELD_SENDER}=HOLD}`,
    "",
    contribPostfix("main.cf.snippet", [
      ...ports,
      ["lmtp:unix:private/dovecot-lmtp", `lmtp:inet:127.0.0.1:${options.lmtpPort}`],
    ]),
  ];
  const daemon = (name: string, type: string, priv: string, wakeup: string, limit: string, command: string) =>
    `${name} ${type} ${priv} - n ${wakeup} ${limit} ${command}`;
  const master = [
    daemon(`127.0.0.1:${smtpPort}`, "inet", "n", "-", "-", "smtpd"),
    // The shipped submission entry on this host's port; no chroot (the queue directory here has
    // none of the files a chrooted smtpd expects).
    contribPostfix("master.cf.snippet", [
      ["127.0.0.1:10003", `127.0.0.1:${adapter.policyPort}`],
      [
        "submission inet n       -       y       -       -       smtpd",
        `127.0.0.1:${submissionPort} inet n - n - - smtpd`,
      ],
    ]),
    daemon("pickup", "unix", "n", "60", "1", "pickup"),
    daemon("cleanup", "unix", "n", "-", "0", "cleanup"),
    daemon("qmgr", "unix", "n", "300", "1", "qmgr"),
    daemon("tlsmgr", "unix", "-", "1000?", "1", "tlsmgr"),
    daemon("rewrite", "unix", "-", "-", "-", "trivial-rewrite"),
    daemon("bounce", "unix", "-", "-", "0", "bounce"),
    daemon("defer", "unix", "-", "-", "0", "bounce"),
    daemon("trace", "unix", "-", "-", "0", "bounce"),
    daemon("verify", "unix", "-", "-", "1", "verify"),
    daemon("flush", "unix", "n", "1000?", "0", "flush"),
    daemon("proxymap", "unix", "-", "-", "-", "proxymap"),
    daemon("smtp", "unix", "-", "-", "-", "smtp"),
    daemon("showq", "unix", "n", "-", "-", "showq"),
    daemon("error", "unix", "-", "-", "-", "error"),
    daemon("retry", "unix", "-", "-", "-", "error"),
    daemon("discard", "unix", "-", "-", "-", "discard"),
    daemon("lmtp", "unix", "-", "-", "-", "lmtp"),
    daemon("anvil", "unix", "-", "-", "1", "anvil"),
    daemon("scache", "unix", "-", "-", "1", "scache"),
    daemon("postlog", "unix-dgram", "n", "-", "1", "postlogd"),
  ];
  writeFileSync(join(configDir, "main.cf"), `${main.join("\n")}\n`);
  writeFileSync(join(configDir, "master.cf"), `${master.join("\n")}\n`);
  const log = () => (existsSync(`${dir}/postfix.log`) ? readFileSync(`${dir}/postfix.log`, "utf8") : "");
  const checked = run("/usr/sbin/postfix", ["-c", configDir, "check"]);
  assert.equal(checked.status, 0, `postfix check: ${checked.stdout}${checked.stderr}${log()}`);
  const started = run("/usr/sbin/postfix", ["-c", configDir, "start"]);
  assert.equal(started.status, 0, `postfix start: ${started.stdout}${started.stderr}${log()}`);
  await waitForPort("Postfix smtpd", smtpPort);
  await waitForPort("Postfix submission", submissionPort);
  const socketmap = `socketmap:inet:127.0.0.1:${adapter.socketmapPort}`;
  return {
    smtpPort,
    submissionPort,
    configDir,
    log,
    postmap: (key, map) => run("/usr/sbin/postmap", ["-c", configDir, "-q", key, `${socketmap}:${map}`]),
    postsuper: (args) => run("/usr/sbin/postsuper", ["-c", configDir, ...args]),
    stop: async () => {
      run("/usr/sbin/postfix", ["-c", configDir, "stop"]);
    },
  };
}

/** Removes a test's directory tree (mail storage included). */
export function removeDirectory(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
