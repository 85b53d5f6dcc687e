/**
 * Issue 30, "a million users": the data set at 100,000 and at 1,000,000 users, the lookups' p99 at
 * 64 connections on both, the admin users page at both, and the service's memory at rest.
 *
 *   node bench/scale.ts generate --database sqlite|postgres --users N [--dir DIR]
 *   node bench/scale.ts measure  --database sqlite|postgres --users N [--dir DIR] [--seconds S] [--out FILE]
 *                                [--skip-admin] [--memory-only]
 *   node bench/scale.ts summary  [--out FILE] RESULT.json...
 *   node bench/scale.ts drop     --database postgres --users N [--dir DIR]
 *   node bench/scale.ts smoke    (all three steps on 1,000 users, SQLite, 1 s per figure)
 *
 * `generate` fills a database (SQLite: a file in DIR, default /tmp/mas-scale; PostgreSQL: a fresh
 * database on TEST_POSTGRES_URL, kept) and writes DIR/<database>-<users>.json (its URL, the API
 * tokens, how long it took). `measure` starts the service on it as production runs it (jobs off, so
 * nothing but the bench reads the database), measures its memory after the start and after a
 * warm-up, each lookup endpoint at 64 connections, then the admin users page at 1 connection, and
 * writes one result file. `summary` sets each figure beside its target. `npm run bench -- --users N`
 * runs generate, measure and (PostgreSQL) drop for both databases. See bench/README.md, "Issue 30".
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { sql } from "kysely";
import { InstallationSecret } from "../packages/service/src/config.ts";
import { CryptoPool } from "../packages/service/src/credentials/crypto-pool.ts";
import { openDatabase } from "../packages/service/src/db/database.ts";
import { migrateToLatest } from "../packages/service/src/db/migrate.ts";
import { createServices } from "../packages/service/src/services.ts";
import { createDatabase, dropDatabase } from "../packages/service/test/helpers/databases.ts";
import { freePort } from "../packages/service/test/helpers/process.ts";
import {
  benchPassword,
  type DatasetSize,
  endpointScope,
  type GeneratedDataset,
  generateDataset,
  keyList,
  lookupEndpoints,
  makeCredentials,
} from "./dataset.ts";
import { detectLoadGenerator, type LoadResult, runLoad } from "./load.ts";
import { spawnService } from "./service-process.ts";
import { webSignIn } from "./web-sign-in.ts";

const repoRoot = fileURLToPath(new URL("../", import.meta.url));
const log = (line: string) => process.stderr.write(`[scale] ${line}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    database: { type: "string", default: "sqlite" },
    users: { type: "string", default: "100000" },
    dir: { type: "string", default: "/tmp/mas-scale" },
    seconds: { type: "string", default: "5" },
    out: { type: "string" },
    "memory-only": { type: "boolean", default: false },
    "skip-admin": { type: "boolean", default: false },
  },
});

/** 1,000 domains, as many aliases as users (the 100,000 data set of `npm run bench`, scaled). */
export const scaledSize = (users: number): DatasetSize => ({
  domains: users >= 100_000 ? 1000 : 10,
  users,
  aliases: users,
});

const adminEmail = "admin@domain0.example";

interface Generated {
  database: string;
  url: string;
  size: DatasetSize;
  generateSeconds: number;
  analyzeSeconds: number;
  tokens: GeneratedDataset["tokens"];
}

const metaFile = (dir: string, database: string, users: number) => join(dir, `${database}-${users}.json`);

async function generate(database: string, users: number, dir: string): Promise<Generated> {
  mkdirSync(dir, { recursive: true });
  const size = scaledSize(users);
  let url: string;
  if (database === "sqlite") {
    const file = join(dir, `${database}-${users}.sqlite`);
    for (const f of [file, `${file}-wal`, `${file}-shm`]) rmSync(f, { force: true });
    url = `sqlite:${file}`;
  } else if (database === "postgres") {
    const server = process.env.TEST_POSTGRES_URL;
    if (!server) throw new Error("TEST_POSTGRES_URL is not set");
    url = (await createDatabase(server, "mas_scale")).url;
  } else throw new Error(`--database sqlite|postgres, not ${database}`);
  log(`generating ${users} users, ${size.aliases} aliases, ${size.domains} domains on ${database}`);
  const handle = await openDatabase(url);
  const dataset = await generateDataset(handle, size, await makeCredentials());
  const services = createServices(handle, new CryptoPool(1), {
    installationSecret: InstallationSecret.generate(),
  });
  await services.users.create({ email: adminEmail, password: benchPassword, roles: ["ROLE_ADMIN"] });
  // Statistics, as a database that has lived a while has them (autovacuum, SQLite's optimize).
  const analyzing = performance.now();
  await (database === "sqlite" ? sql`ANALYZE` : sql`VACUUM ANALYZE`).execute(handle.db);
  const analyzeSeconds = (performance.now() - analyzing) / 1000;
  await handle.close();
  const meta: Generated = {
    database,
    url,
    size,
    generateSeconds: dataset.seconds,
    analyzeSeconds,
    tokens: dataset.tokens,
  };
  writeFileSync(metaFile(dir, database, users), `${JSON.stringify(meta, null, 2)}\n`);
  log(`generated in ${dataset.seconds.toFixed(1)} s, statistics in ${analyzeSeconds.toFixed(1)} s`);
  return meta;
}

async function drop(database: string, users: number, dir: string) {
  const file = metaFile(dir, database, users);
  if (!existsSync(file)) return;
  const meta = JSON.parse(readFileSync(file, "utf8")) as Generated;
  if (database === "postgres" && process.env.TEST_POSTGRES_URL)
    await dropDatabase(process.env.TEST_POSTGRES_URL, meta.url);
  if (database === "sqlite") {
    const path = meta.url.slice("sqlite:".length);
    for (const f of [path, `${path}-wal`, `${path}-shm`]) rmSync(f, { force: true });
  }
  rmSync(file, { force: true });
}

/**
 * Resident memory of a process, in MiB: all of it, then its own (heap, stacks: RssAnon) apart from
 * mapped files (RssFile: the code, and on SQLite the memory-mapped database, pages the kernel
 * shares and can drop at will).
 */
function rssMiB(pid: number): { rss: number; anon: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const mib = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? 0) / 1024;
  return { rss: mib("VmRSS"), anon: mib("RssAnon"), file: mib("RssFile") };
}

async function startService(databaseUrl: string, logFile: string) {
  const port = await freePort();
  const child: ChildProcess = spawnService({ databaseUrl, port, logFile, env: { JOBS_ENABLED: "false" } });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`the service exited: ${readFileSync(logFile, "utf8")}`);
    try {
      if ((await fetch(`${url}/health`)).ok) break;
    } catch {}
    if (i > 600) throw new Error("the service did not start");
    await sleep(100);
  }
  return { child, url, pid: child.pid ?? 0 };
}

/** The admin users page's URLs: searches, each filter of the page, and pages at the start, middle and end. */
function adminPages(size: DatasetSize, firstId: number, lastId: number) {
  const middle = Math.floor((firstId + lastId) / 2);
  return [
    { name: "first page (active)", query: "" },
    { name: "search one user", query: `search=user${Math.floor(size.users * 0.4711)}%40` },
    { name: "search ~1% (domain42.)", query: "search=domain42." },
    { name: "search ~11% (domain7)", query: "search=domain7" },
    { name: "search nobody", query: "search=nobody-here" },
    { name: "status deleted", query: "status=deleted" },
    { name: "status all", query: "status=all" },
    { name: "role ROLE_SPAM", query: "role=ROLE_SPAM" },
    { name: "MailCrypt enabled", query: "mailCrypt=enabled" },
    { name: "2FA enabled (none)", query: "twoFactor=enabled" },
    { name: "domain 42", query: "domain=43" },
    { name: "search + filters", query: "search=domain7&mailCrypt=enabled&role=ROLE_USER" },
    { name: "middle page", query: `status=all&after=${middle}` },
    { name: "last page", query: `status=all&after=${firstId + 10}` },
    { name: "last page, going back", query: `status=all&before=${firstId + 10}` },
    { name: "middle page of a search", query: `search=domain7&after=${middle}` },
  ];
}

async function measure(
  database: string,
  users: number,
  dir: string,
  seconds: number,
  out?: string,
  memoryOnly = false,
) {
  const meta = JSON.parse(readFileSync(metaFile(dir, database, users), "utf8")) as Generated;
  const size = meta.size;
  const generator = detectLoadGenerator();
  const workDir = join(dir, `work-${database}-${users}`);
  mkdirSync(workDir, { recursive: true });
  const idHandle = await openDatabase(meta.url);
  // A data set generated by an older build: its migrations and statistics brought up to this one.
  await migrateToLatest(idHandle);
  await sql`ANALYZE`.execute(idHandle.db);
  const ids = await idHandle.db
    .selectFrom("users")
    .select((eb) => [eb.fn.min("id").as("first"), eb.fn.max("id").as("last")])
    .executeTakeFirstOrThrow();
  await idHandle.close();
  const service = await startService(meta.url, join(workDir, "service.log"));
  try {
    await sleep(2000);
    const memory: Record<string, ReturnType<typeof rssMiB>> = { afterStart: rssMiB(service.pid) };
    const lists = lookupEndpoints.map(
      (endpoint, n) => [endpoint, keyList(endpoint, size, 20_000, n + 1)] as const,
    );
    const spec = (endpoint: (typeof lookupEndpoints)[number], requests: ReturnType<typeof keyList>) => ({
      url: service.url,
      requests,
      method: "GET" as const,
      token: meta.tokens[endpointScope(endpoint)],
      workDir,
      name: `${database}-${users}-${endpoint}`,
    });
    // Warm-up: every endpoint, then a rest so the figure is memory at rest, not in flight.
    for (const [endpoint, requests] of lists)
      await runLoad(generator.name, { ...spec(endpoint, requests), connections: 64, seconds: 2 });
    await sleep(3000);
    memory.afterWarm = rssMiB(service.pid);
    if (memoryOnly) {
      log(`${database} ${users} RSS (MiB): ${JSON.stringify(memory)}`);
      const file = out ?? join(dir, `memory-${database}-${users}.json`);
      writeFileSync(
        file,
        `${JSON.stringify({ date: new Date().toISOString(), database, size, memory }, null, 2)}\n`,
      );
      return null;
    }
    const lookups: Record<string, LoadResult> = {};
    for (const [endpoint, requests] of lists) {
      const result = await runLoad(generator.name, {
        ...spec(endpoint, requests),
        connections: 64,
        seconds,
      });
      if (result.errors > 0) throw new Error(`${endpoint}: ${result.errors} connection errors`);
      lookups[endpoint] = result;
      log(
        `${database} ${users} ${endpoint.padEnd(10)} c64 ${result.rps.toFixed(0).padStart(6)} req/s  p50 ${result.p50Ms.toFixed(2)}  p99 ${result.p99Ms.toFixed(2)} ms`,
      );
    }
    const cookie = await webSignIn(service.url, adminEmail);
    const admin: Record<string, LoadResult & { query: string }> = {};
    const pages = args["skip-admin"] ? [] : adminPages(size, Number(ids.first), Number(ids.last));
    for (const { name, query } of pages) {
      const path = `/admin/users${query ? `?${query}` : ""}`;
      const check = await fetch(`${service.url}${path}`, { headers: { cookie } });
      if (check.status !== 200) throw new Error(`${path} answered ${check.status}`);
      const result = await runLoad(generator.name, {
        url: service.url,
        requests: [{ path, kind: "existing" }],
        method: "GET",
        cookie,
        connections: 1,
        seconds,
        workDir,
        name: `${database}-${users}-admin`,
      });
      if (result.errors > 0 || result.non2xx > 0)
        throw new Error(`${path}: ${result.errors} errors, ${result.non2xx} non-2xx`);
      admin[name] = { query, ...result };
      log(
        `${database} ${users} ${name.padEnd(24)} c1 ${result.rps.toFixed(0).padStart(5)} req/s  p50 ${result.p50Ms.toFixed(1)}  p99 ${result.p99Ms.toFixed(1)} ms`,
      );
    }
    await sleep(2000);
    memory.afterAll = rssMiB(service.pid);
    log(`${database} ${users} RSS (MiB): ${JSON.stringify(memory)}`);
    const result = {
      date: new Date().toISOString(),
      command: process.argv.slice(1).join(" "),
      machine: {
        cpus: cpus().length,
        model: cpus()[0]?.model ?? "",
        memoryGiB: Math.round(totalmem() / 2 ** 30),
        node: process.version,
      },
      loadAverageAtEnd: loadavg(),
      generator: generator.version,
      database,
      size,
      generateSeconds: meta.generateSeconds,
      analyzeSeconds: meta.analyzeSeconds,
      seconds,
      memory,
      lookupsC64: lookups,
      adminPageC1: admin,
    };
    const file =
      out ??
      join(
        repoRoot,
        "bench/results",
        `${new Date().toISOString().slice(0, 10)}-scale-${database}-${users}.json`,
      );
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
    log(`written ${file}`);
    return result;
  } finally {
    service.child.kill("SIGTERM");
    await sleep(500);
  }
}

const rss = (m: { rss: number; anon: number; file: number }) =>
  `${m.rss.toFixed(0)} (own ${m.anon.toFixed(0)}, mapped files ${m.file.toFixed(0)})`;

type Measured = NonNullable<Awaited<ReturnType<typeof measure>>>;

/** Each figure of issue 30 beside its target, from the result files of `measure`. */
function summary(files: string[], out?: string) {
  const runs = files.map((f) => JSON.parse(readFileSync(f, "utf8")) as Measured);
  const lines: string[] = [];
  const targets: { name: string; target: string; value: number; met: boolean }[] = [];
  const put = (name: string, target: string, value: number, met: boolean, unit = "") => {
    targets.push({ name, target, value, met });
    lines.push(
      `${name.padEnd(62)} ${value.toFixed(unit === "ratio" ? 2 : 1).padStart(8)} ${unit}  target ${target}  ${met ? "met" : "MISSED"}`,
    );
  };
  for (const run of runs)
    put(
      `generate ${run.size.users} users + aliases, ${run.database} (s)`,
      "minutes",
      run.generateSeconds,
      run.generateSeconds < 600,
      "s",
    );
  for (const database of [...new Set(runs.map((r) => r.database))]) {
    const bySize = runs.filter((r) => r.database === database).sort((a, b) => a.size.users - b.size.users);
    const small = bySize[0];
    const large = bySize.at(-1);
    if (small && large && small !== large)
      for (const endpoint of Object.keys(large.lookupsC64)) {
        const a = small.lookupsC64[endpoint]?.p99Ms ?? Number.NaN;
        const b = large.lookupsC64[endpoint]?.p99Ms ?? Number.NaN;
        put(
          `${database} ${endpoint} p99 c64 ${large.size.users} / ${small.size.users} (${b.toFixed(1)} / ${a.toFixed(1)} ms)`,
          "<= 1.2",
          b / a,
          b / a <= 1.2,
          "ratio",
        );
      }
    for (const run of bySize) {
      const worst = Object.entries(run.adminPageC1).sort((x, y) => y[1].p99Ms - x[1].p99Ms)[0];
      if (worst)
        put(
          `${database} ${run.size.users} admin users page worst p99 c1 (${worst[0]})`,
          "< 100 ms",
          worst[1].p99Ms,
          worst[1].p99Ms < 100,
          "ms",
        );
      const memory = Object.entries(run.memory as Record<string, unknown>).map(([when, m]) =>
        typeof m === "number"
          ? `${when} ${m.toFixed(0)}`
          : `${when} ${rss(m as { rss: number; anon: number; file: number })}`,
      );
      lines.push(`${database} ${run.size.users} RSS (MiB): ${memory.join(", ")}`);
    }
  }
  process.stdout.write(`${lines.join("\n")}\n`);
  if (out) writeFileSync(out, `${JSON.stringify({ files, targets }, null, 2)}\n`);
}

const [command] = positionals;
const users = Number(args.users);
if (!Number.isInteger(users) || users < 100) {
  console.error("--users takes a whole number, at least 100");
  process.exit(2);
}
const dir = args.dir as string;
const database = args.database as string;
if (command === "generate") await generate(database, users, dir);
else if (command === "measure")
  await measure(database, users, dir, Number(args.seconds), args.out, args["memory-only"]);
else if (command === "drop") await drop(database, users, dir);
else if (command === "summary") summary(positionals.slice(1), args.out);
else if (command === "smoke") {
  const smokeDir = join(dir, `smoke-${process.pid}`);
  try {
    await generate("sqlite", 1000, smokeDir);
    const out = join(smokeDir, "result.json");
    await measure("sqlite", 1000, smokeDir, 1, out);
    summary([out]);
  } finally {
    rmSync(smokeDir, { recursive: true, force: true });
  }
} else {
  console.error("node bench/scale.ts generate|measure|summary|drop|smoke (see the header)");
  process.exit(2);
}
