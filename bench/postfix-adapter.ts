/**
 * The Postfix adapter's figures (issue 21, "Performance"): socketmap lookups per second through the
 * adapter against the same lookups sent straight to the service over HTTP, the p99 at 16 concurrent
 * clients, and the policy server's answers per second (counters in memory, and shared in Redis when
 * one answers at TEST_REDIS_URL or redis://127.0.0.1:6379).
 *
 *   node bench/postfix-adapter.ts [--smoke] [--out FILE] [--seconds N] [--rounds N] [--profile DIR]
 *
 * --profile DIR: the adapter runs with --cpu-prof; open the .cpuprofile files in DevTools.
 *
 * Everything runs on this machine: the service (SQLite, as production runs it), the adapter
 * (bin/postfix-adapter) and the load, which this process makes itself: netstrings over TCP for the
 * socketmap, and for the direct runs the adapter's own keep-alive HTTP client (http-client.ts with
 * the adapter's settings, createServicePool() in service-client.ts), so both sides of the ratio ask
 * the service the same way and the ratio shows what the extra hop through the adapter costs.
 * Beside them, the same lookups through socketmap-floor.ts, a proxy with nothing but the two
 * sockets: the part of the hop's cost that is the extra process, not the adapter's code. Direct,
 * adapter and floor runs alternate, side by side, and the ratios are taken per round: a shared
 * host's speed drifts over minutes.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect as connectTcp, type Socket } from "node:net";
import { availableParallelism, cpus, tmpdir, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Redis } from "ioredis";
import { createServicePool } from "../packages/postfix-adapter/src/service-client.ts";
import { InstallationSecret } from "../packages/service/src/config.ts";
import { CryptoPool } from "../packages/service/src/credentials/crypto-pool.ts";
import { openDatabase } from "../packages/service/src/db/database.ts";
import { createServices } from "../packages/service/src/services.ts";
import { freePort } from "../packages/service/test/helpers/process.ts";
import {
  endpointPath,
  fullSize,
  type GeneratedDataset,
  generateDataset,
  keyList,
  type LookupEndpoint,
  makeCredentials,
  prng,
  smokeSize,
} from "./dataset.ts";
import { percentile } from "./passdb-client.ts";
import { spawnService } from "./service-process.ts";

const repoRoot = fileURLToPath(new URL("../", import.meta.url));
const node = process.execPath;
const log = (line: string) => process.stderr.write(`[bench adapter] ${line}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const { values: args } = parseArgs({
  options: {
    smoke: { type: "boolean", default: false },
    out: { type: "string" },
    seconds: { type: "string" },
    rounds: { type: "string" },
    profile: { type: "string" },
  },
});
const smoke = args.smoke ?? false;
const settings = {
  seconds: Number(args.seconds ?? (smoke ? 1 : 10)),
  warmupSeconds: smoke ? 1 : 3,
  rounds: Number(args.rounds ?? (smoke ? 1 : 3)),
  connections: [1, 16],
  keys: smoke ? 1000 : 20_000,
};
const size = smoke ? smokeSize : fullSize;
const workDir = mkdtempSync(join(tmpdir(), "mas-bench-adapter-"));

// ---------------------------------------------------------------------------------------------
// Processes

interface Child {
  child: ChildProcess;
  pid: number;
  stop(): Promise<void>;
}

function stopper(child: ChildProcess): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("exit", () => resolve());
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), 15_000).unref();
    });
}

async function startService(databaseUrl: string): Promise<Child & { url: string }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const logFile = join(workDir, "service.log");
    const child = spawnService({ databaseUrl, port, logFile });
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) break;
      if ((await fetch(`${url}/health`).catch(() => null))?.ok) {
        return { child, pid: child.pid ?? 0, url, stop: stopper(child) };
      }
      if (Date.now() > deadline) throw new Error("the service did not start");
      await sleep(100);
    }
    const output = readFileSync(logFile, "utf8");
    if (attempt >= 5 || !output.includes("EADDRINUSE"))
      throw new Error(`service exited: ${output.slice(-2000)}`);
  }
}

async function startAdapter(
  env: Record<string, string>,
): Promise<Child & { socketmap: number; policy: number }> {
  const child = spawn(join(repoRoot, "bin/postfix-adapter"), [], {
    env: {
      PATH: process.env.PATH ?? "",
      SOCKETMAP_LISTEN_ADDR: "127.0.0.1:0",
      POLICY_LISTEN_ADDR: "127.0.0.1:0",
      SASL_LISTEN_ADDR: "off",
      METRICS_LISTEN_ADDR: "off",
      LOG_LEVEL: "info",
      ...(args.profile ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${args.profile}` } : {}),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stderr.on("data", (chunk) => (output += chunk));
  const listening = await new Promise<Record<string, string>>((resolve, reject) => {
    let pending = "";
    child.stdout.on("data", (chunk: Buffer) => {
      pending += chunk.toString();
      for (const line of pending.split("\n")) {
        if (line.includes('"msg":"listening"')) resolve(JSON.parse(line));
        else if (/"level":(40|50|60)/.test(line)) log(`adapter: ${line}`);
      }
      pending = pending.slice(pending.lastIndexOf("\n") + 1);
    });
    child.on("exit", (code) => reject(new Error(`adapter exited with ${code}: ${output}`)));
  });
  const port = (value: string | undefined) => Number(value?.slice(value.lastIndexOf(":") + 1));
  return {
    child,
    pid: child.pid ?? 0,
    socketmap: port(listening["socketmap"]),
    policy: port(listening["policy"]),
    stop: stopper(child),
  };
}

/** The floor proxy (socketmap-floor.ts): what the extra process costs with nothing in it. */
async function startFloor(env: Record<string, string>): Promise<Child & { socketmap: number }> {
  const child = spawn(node, [join(repoRoot, "bench/socketmap-floor.ts")], {
    env: { PATH: process.env.PATH ?? "", SOCKETMAP_LISTEN_ADDR: "127.0.0.1:0", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const listening = await new Promise<string>((resolve, reject) => {
    child.stdout.once("data", (chunk: Buffer) => resolve(JSON.parse(chunk.toString()).listening));
    child.on("exit", (code) => reject(new Error(`floor proxy exited with ${code}`)));
  });
  return {
    child,
    pid: child.pid ?? 0,
    socketmap: Number(listening.slice(listening.lastIndexOf(":") + 1)),
    stop: stopper(child),
  };
}

/** User and system CPU seconds of a process so far. */
function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

// ---------------------------------------------------------------------------------------------
// Load: a closed loop of `connections` clients for `seconds`, each waiting for its answer

interface Result {
  connections: number;
  seconds: number;
  requests: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  errors: number;
  /** What the answers were (first word), to show the lookups were real. */
  answers: Record<string, number>;
  /** CPU time of the adapter (or the service, for direct runs) per request, in µs. */
  cpuUsPerRequest?: number;
}

async function closedLoop(
  connections: number,
  seconds: number,
  open: () => Promise<(n: number) => Promise<string>>,
): Promise<Result> {
  const workers = await Promise.all(Array.from({ length: connections }, open));
  const latencies: number[] = [];
  const answers: Record<string, number> = {};
  let errors = 0;
  let next = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    workers.map(async (ask) => {
      while (performance.now() < until) {
        const t0 = performance.now();
        try {
          const answer = await ask(next++);
          latencies.push(performance.now() - t0);
          answers[answer] = (answers[answer] ?? 0) + 1;
        } catch {
          errors += 1;
        }
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    connections,
    seconds: elapsed,
    requests: latencies.length,
    rps: latencies.length / elapsed,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    maxMs: latencies[latencies.length - 1] ?? 0,
    errors,
    answers,
  };
}

/** One lookup as the socketmap request and as the service's URL. */
interface Lookup {
  map: string;
  key: string;
  path: string;
}

/**
 * The direct side: the adapter's own HTTP client (http-client.ts, as the adapter sets it up) asking
 * the service, so the direct runs and the adapter's requests to the service cost the same on the
 * client side, and the ratio isolates what the socketmap hop adds.
 */
function directClient(url: string, token: string, lookups: Lookup[]) {
  return (connections: number) => {
    const pool = createServicePool(new URL(url), 10_000, connections);
    const headers = `authorization: Bearer ${token}\r\naccept: application/json\r\n`;
    return async () => async (n: number) => {
      const lookup = lookups[n % lookups.length] as Lookup;
      const answer = await pool.request("GET", lookup.path, headers, undefined, true);
      const body = answer.body.toString();
      return answer.status !== 200
        ? String(answer.status)
        : body === "false" || body === "[]"
          ? "empty"
          : "found";
    };
  };
}

/** A client connection speaking netstrings: one request, one answer, in turn. */
class NetstringConnection {
  readonly #socket: Socket;
  #buffer: Buffer = Buffer.alloc(0);
  #waiting: ((text: string) => void) | null = null;
  #failed: ((error: Error) => void) | null = null;

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => {
      this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
      const colon = this.#buffer.indexOf(0x3a);
      if (colon < 0) return;
      const length = Number(this.#buffer.subarray(0, colon).toString());
      const end = colon + 1 + length;
      if (this.#buffer.length <= end) return;
      const text = this.#buffer.subarray(colon + 1, end).toString();
      this.#buffer = this.#buffer.subarray(end + 1);
      const waiting = this.#waiting;
      this.#waiting = null;
      waiting?.(text);
    });
    socket.on("error", (error) => this.#failed?.(error));
  }

  static open(port: number): Promise<NetstringConnection> {
    return new Promise((resolve, reject) => {
      const socket = connectTcp({ host: "127.0.0.1", port }, () => resolve(new NetstringConnection(socket)));
      socket.once("error", reject);
    });
  }

  ask(text: string): Promise<string> {
    return new Promise((resolve, reject) => {
      this.#waiting = resolve;
      this.#failed = reject;
      const payload = Buffer.from(text);
      this.#socket.write(`${payload.length}:${text},`);
    });
  }

  close(): void {
    this.#socket.destroy();
  }
}

/** Policy requests over one connection (Postfix's attribute lines), one at a time. */
class PolicyConnection {
  readonly #socket: Socket;
  #text = "";
  #waiting: ((text: string) => void) | null = null;

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.setNoDelay(true);
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      this.#text += chunk;
      const end = this.#text.indexOf("\n\n");
      if (end < 0) return;
      const answer = this.#text.slice(0, end);
      this.#text = this.#text.slice(end + 2);
      const waiting = this.#waiting;
      this.#waiting = null;
      waiting?.(answer);
    });
  }

  static open(port: number): Promise<PolicyConnection> {
    return new Promise((resolve, reject) => {
      const socket = connectTcp({ host: "127.0.0.1", port }, () => resolve(new PolicyConnection(socket)));
      socket.once("error", reject);
    });
  }

  ask(request: string): Promise<string> {
    return new Promise((resolve) => {
      this.#waiting = resolve;
      this.#socket.write(request);
    });
  }

  close(): void {
    this.#socket.destroy();
  }
}

function endOfMessage(sender: string): string {
  return [
    "request=smtpd_access_policy",
    "protocol_state=END-OF-MESSAGE",
    "protocol_name=ESMTP",
    "client_address=192.0.2.10",
    "client_name=client.example.net",
    "helo_name=laptop",
    `sender=${sender}`,
    "recipient=",
    "recipient_count=1",
    "queue_id=4XyZ1234",
    "instance=1a2b.6791a2b3.c4d5.0",
    "size=2345",
    "sasl_method=PLAIN",
    `sasl_username=${sender}`,
    "encryption_protocol=TLSv1.3",
    "",
    "",
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// The run

const started = Date.now();
const mapNames: LookupEndpoint[] = ["domain", "mailbox", "alias", "senders"];
const lookups: Lookup[] = [];
{
  const perMap = mapNames.map((map, n) =>
    keyList(map, size, settings.keys, 300 + n).map((request) => ({
      map,
      key: decodeURIComponent(request.path.slice(endpointPath[map].length)),
      path: request.path,
    })),
  );
  // Postfix asks all four in a mix: interleave them in a fixed random order.
  const random = prng(42);
  for (let n = 0; n < settings.keys; n++) {
    const list = perMap[Math.floor(random() * perMap.length)] as Lookup[];
    lookups.push(list[n] as Lookup);
  }
}
const senders = keyList("smtp_quota", size, settings.keys, 500)
  .filter((request) => request.kind === "existing")
  .map((request) => decodeURIComponent(request.path.slice(endpointPath.smtp_quota.length)));

const redisUrl = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379/0";
const redisReachable = await new Promise<boolean>((resolve) => {
  const { hostname, port } = new URL(redisUrl);
  const socket = connectTcp({ host: hostname, port: Number(port || 6379) }, () => {
    socket.destroy();
    resolve(true);
  });
  socket.on("error", () => resolve(false));
});

const results = {
  date: new Date().toISOString(),
  mode: smoke ? "smoke" : "full",
  machine: {
    cpus: availableParallelism(),
    cpuModel: cpus()[0]?.model ?? "unknown",
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    note: "load client (this process), adapter and service share the same CPUs; the host is shared with other work",
  },
  settings: {
    ...settings,
    dataset: size,
    lookupMix: "domain, mailbox, alias, senders in equal shares (keyList mixes)",
  },
  socketmap: [] as {
    round: number;
    direct: Result;
    adapter: Result;
    ratio: number;
    floor: Result;
    floorRatio: number;
  }[],
  policy: {} as Record<string, Result>,
  targets: [] as { name: string; target: string; value: number; met: boolean }[],
  totalSeconds: 0,
};

const databaseFile = join(workDir, "bench.sqlite");
let service: (Child & { url: string }) | null = null;
const adapters: Child[] = [];
let dataset: GeneratedDataset;
try {
  log(`generating the data set (${size.users} users, ${size.aliases} aliases, ${size.domains} domains)`);
  const handle = await openDatabase(`sqlite:${databaseFile}`, { poolSize: 4 });
  try {
    dataset = await generateDataset(handle, size, await makeCredentials());
    // Every sender gets a quota far above what the run can send: each policy answer then counts.
    await createServices(handle, new CryptoPool(1), {
      installationSecret: InstallationSecret.generate(),
    }).settings.update({
      smtp_quota_limit_per_hour: 1_000_000_000,
      smtp_quota_limit_per_day: 1_000_000_000,
    });
  } finally {
    await handle.close();
  }
  service = await startService(`sqlite:${databaseFile}`);
  const adapter = await startAdapter({ SERVICE_URL: service.url, SERVICE_TOKEN: dataset.tokens.mta });
  adapters.push(adapter);
  const floor = await startFloor({ SERVICE_URL: service.url, SERVICE_TOKEN: dataset.tokens.mta });
  adapters.push(floor);

  const direct = directClient(service.url, dataset.tokens.mta, lookups);
  const socketmapClient = (port: number) => async () => {
    const connection = await NetstringConnection.open(port);
    return (n: number) => {
      const lookup = lookups[n % lookups.length] as Lookup;
      return connection
        .ask(`${lookup.map} ${lookup.key}`)
        .then((answer) => answer.slice(0, answer.indexOf(" ")));
    };
  };
  const viaAdapter = socketmapClient(adapter.socketmap);
  const viaFloor = socketmapClient(floor.socketmap);
  const measure = async (
    name: string,
    pid: number,
    connections: number,
    seconds: number,
    open: () => Promise<(n: number) => Promise<string>>,
  ) => {
    const before = cpuSecondsOf(pid);
    const result = await closedLoop(connections, seconds, open);
    result.cpuUsPerRequest = ((cpuSecondsOf(pid) - before) * 1e6) / Math.max(result.requests, 1);
    log(
      `  ${name.padEnd(8)} c=${String(connections).padStart(2)} ${result.rps.toFixed(0).padStart(6)} lookups/s  p50 ${result.p50Ms.toFixed(2)} ms  p99 ${result.p99Ms.toFixed(2)} ms  errors ${result.errors}  ${JSON.stringify(result.answers)}`,
    );
    return result;
  };

  log("warm-up");
  await closedLoop(16, settings.warmupSeconds, direct(16));
  await closedLoop(16, settings.warmupSeconds, viaAdapter);
  await closedLoop(16, settings.warmupSeconds, viaFloor);
  log(
    "socketmap through the adapter vs the same lookups straight to the service (the same HTTP client for the direct runs as inside the adapter)",
  );
  for (let round = 1; round <= settings.rounds; round++) {
    for (const connections of settings.connections) {
      const straight = await measure(
        "direct",
        service.pid,
        connections,
        settings.seconds,
        direct(connections),
      );
      const through = await measure("adapter", adapter.pid, connections, settings.seconds, viaAdapter);
      const bare = await measure("floor", floor.pid, connections, settings.seconds, viaFloor);
      results.socketmap.push({
        round,
        direct: straight,
        adapter: through,
        ratio: through.rps / straight.rps,
        floor: bare,
        floorRatio: bare.rps / straight.rps,
      });
      log(
        `  ratio ${(through.rps / straight.rps).toFixed(2)} (floor ${(bare.rps / straight.rps).toFixed(2)})`,
      );
    }
  }

  const policyRun = async (name: string, port: number, pid: number) => {
    const open = async () => {
      const connection = await PolicyConnection.open(port);
      return (n: number) => connection.ask(endOfMessage(senders[n % senders.length] as string));
    };
    await closedLoop(16, settings.warmupSeconds, open);
    results.policy[name] = await measure(`policy ${name}`, pid, 16, settings.seconds, open);
  };
  log("policy server: END-OF-MESSAGE requests (smtp_quota lookup, then the counters)");
  await policyRun("memory", adapter.policy, adapter.pid);
  if (redisReachable) {
    const shared = await startAdapter({
      SERVICE_URL: service.url,
      SERVICE_TOKEN: dataset.tokens.mta,
      REDIS_URL: redisUrl,
    });
    adapters.push(shared);
    await policyRun("redis", shared.policy, shared.pid);
    // The counters this run made (its senders' domains are the data set's, domainN.example).
    const redis = new Redis(redisUrl);
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(
        cursor,
        "MATCH",
        "postfix-adapter:quota:*@domain*.example",
        "COUNT",
        1000,
      );
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== "0");
    redis.disconnect();
  } else {
    log(`no Redis at ${redisUrl}: the shared counters are not measured`);
  }
} finally {
  for (const adapter of adapters) await adapter.stop();
  await service?.stop();
  rmSync(workDir, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------------------------
// Targets, file and table

const median = (values: number[]) =>
  percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
for (const connections of settings.connections) {
  const rows = results.socketmap.filter((row) => row.direct.connections === connections);
  const ratio = median(rows.map((row) => row.ratio));
  log(
    `c=${connections}: floor proxy / straight to the service, median ${median(rows.map((row) => row.floorRatio)).toFixed(2)}`,
  );
  results.targets.push({
    name: `socketmap lookups through the adapter / straight to the service (c=${connections}, median of ${rows.length})`,
    target: ">= 0.7",
    value: ratio,
    met: ratio >= 0.7,
  });
}
{
  const p99 = median(
    results.socketmap.filter((row) => row.adapter.connections === 16).map((row) => row.adapter.p99Ms),
  );
  results.targets.push({
    name: "socketmap p99 ms through the adapter (c=16, SQLite)",
    target: "< 5",
    value: p99,
    met: p99 < 5,
  });
}
results.totalSeconds = (Date.now() - started) / 1000;

const out =
  args.out ??
  join(
    repoRoot,
    "bench/results",
    `${new Date().toISOString().slice(0, 10)}-postfix-adapter${smoke ? "-smoke" : ""}.json`,
  );
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);

const fmt = (n: number, digits = 0) => n.toFixed(digits);
const lines = [
  `machine: ${results.machine.cpus} CPUs (${results.machine.cpuModel}), Node ${results.machine.node}; load, adapter and service on the same CPUs`,
  "",
  "| round | conns | direct lookups/s | adapter lookups/s | ratio | floor ratio | direct p99 ms | adapter p50 ms | adapter p99 ms | adapter CPU µs/lookup | floor CPU µs/lookup |",
  "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
  ...results.socketmap.map(
    (row) =>
      `| ${row.round} | ${row.direct.connections} | ${fmt(row.direct.rps)} | ${fmt(row.adapter.rps)} | ${fmt(row.ratio, 2)} | ${fmt(row.floorRatio, 2)} | ${fmt(row.direct.p99Ms, 2)} | ${fmt(row.adapter.p50Ms, 2)} | ${fmt(row.adapter.p99Ms, 2)} | ${fmt(row.adapter.cpuUsPerRequest ?? 0)} | ${fmt(row.floor.cpuUsPerRequest ?? 0)} |`,
  ),
  "",
  ...Object.entries(results.policy).map(
    ([name, r]) =>
      `policy (${name} counters, 16 connections): ${fmt(r.rps)} answers/s, p50 ${fmt(r.p50Ms, 2)} ms, p99 ${fmt(r.p99Ms, 2)} ms, adapter CPU ${fmt(r.cpuUsPerRequest ?? 0)} µs/answer, ${JSON.stringify(r.answers)}`,
  ),
  "",
  ...results.targets.map((t) => `${t.met ? "met   " : "MISSED"} ${t.name}: ${fmt(t.value, 2)} (${t.target})`),
  `results: ${out} (${fmt(results.totalSeconds)} s)`,
];
process.stdout.write(`${lines.join("\n")}\n`);
