/**
 * The mailbox janitor: config -> pending deletions file -> HTTP server -> purger and toucher tick
 * loops. SIGTERM/SIGINT: stop accepting, let the running step finish, exit 0.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { type Config, ConfigError, formatDuration, loadConfig } from "./config.ts";
import { createLogger } from "./logger.ts";
import { PendingStore } from "./pending.ts";
import { Purger } from "./purger.ts";
import { SeenDeliveries } from "./seen.ts";
import { createJanitorServer } from "./server.ts";
import { Toucher } from "./toucher.ts";

/** Exit code for configuration errors (sysexits EX_CONFIG); the systemd unit does not restart on it. */
const EXIT_CONFIG = 78;
/** How long shutdown waits for a running purge command before ending it. */
const SHUTDOWN_GRACE_MS = 20_000;
/** setTimeout cannot wait longer than this in one go. */
const MAX_TIMER_MS = 2_147_483_647;

/** The janitor's version, from its package.json (the same as the service's). */
const VERSION = (
  JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
).version;

const USAGE = `mailbox-janitor: purges mailboxes of deleted users and touches forwarding-only users.
Configured through environment variables (see docs/janitor.md):
  WEBHOOK_SECRET (required)        secret of the webhook endpoint on the service
  USERLI_URL (required)            base URL of the account service
  USERLI_TOKEN (required)          API token with scope retention
  TOUCHER_SIEVE_LOCATION (required) Sieve script path; {domain} and {local_part} are substituted
  TOUCHER_USE_SUDO=false           read Sieve scripts through "sudo -n cat"
  TOUCHER_TICK_INTERVAL=24h        how often inactive users are checked
  PURGER_COMMAND=true              /bin/sh command purging a mailbox; {email} {domain} {local_part}
  PURGER_COMMAND_TIMEOUT=10m       a purge command running longer is killed (and retried later)
  PURGER_RETENTION_HOURS=24        hours between deletion and purge
  PURGER_TICK_INTERVAL=1h          how often due mailboxes are purged
  PURGER_DATABASE_PATH=./mailboxes.csv  file of pending deletions (the deliveries already
                                   handled are kept beside it, in <path>.seen)
  LISTEN_ADDR=:8080                HTTP listen address; bind the mail server's private address
                                   (see docs/janitor.md), not every interface
  LOG_LEVEL=info                   debug, info, warn or error
`;

/** Sleeps, waking early when the signal aborts; handles waits longer than one timer can hold. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((done) => {
    if (signal.aborted) {
      done();
      return;
    }
    const until = Date.now() + ms;
    let timer: NodeJS.Timeout;
    const finish = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", finish);
      done();
    };
    const arm = () => {
      const left = until - Date.now();
      if (left <= 0) finish();
      else timer = setTimeout(arm, Math.min(left, MAX_TIMER_MS));
    };
    signal.addEventListener("abort", finish, { once: true });
    arm();
  });
}

/** Environment for purge commands: ours without the secrets. */
function commandEnvironment(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env["WEBHOOK_SECRET"];
  delete env["USERLI_TOKEN"];
  return env;
}

function safeUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`.replace(/\/+$/, "");
}

async function main(): Promise<void> {
  if (process.argv.includes("--help") || process.argv.includes("-h")) {
    process.stdout.write(USAGE);
    return;
  }
  if (process.argv.includes("--version") || process.argv.includes("-V")) {
    process.stdout.write(`mailbox-janitor ${VERSION} (Node.js ${process.versions.node})\n`);
    return;
  }

  let config: Config;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`config error: ${error.message}\n`);
      process.exit(EXIT_CONFIG);
    }
    throw error;
  }

  const logger = createLogger(config.logLevel);
  const fail = (message: string, error: unknown): never => {
    logger.fatal({ err: error instanceof Error ? error.message : String(error) }, message);
    process.exit(1);
  };

  // Until everything runs, a signal only waits for the file to be settled.
  let shutdown = async (signal: string) => {
    logger.info({ signal }, "stopped during start-up");
    await store.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));

  if (
    !config.toucherSieveLocation.includes("{local_part}") &&
    !config.toucherSieveLocation.includes("{email}")
  ) {
    logger.warn(
      { sieveLocation: config.toucherSieveLocation },
      "TOUCHER_SIEVE_LOCATION has no {local_part}: all users of a domain would share one script",
    );
  }

  const store = new PendingStore(resolve(config.purgerDatabasePath));
  try {
    await store.init();
  } catch (error) {
    fail(`cannot use the pending deletions file ${store.path}`, error);
  }

  // Beside the CSV file, so that both live in the janitor's state directory.
  const seen = new SeenDeliveries(`${store.path}.seen`);
  try {
    const dropped = await seen.init();
    for (const line of dropped)
      logger.warn({ file: seen.path, content: line }, "unreadable line in the seen deliveries file, dropped");
  } catch (error) {
    fail(`cannot use the seen deliveries file ${seen.path}`, error);
  }

  const purger = new Purger({
    command: config.purgerCommand,
    timeoutMs: config.purgerCommandTimeoutMs,
    retentionHours: config.purgerRetentionHours,
    store,
    logger,
    env: commandEnvironment(),
  });
  const toucher = new Toucher({
    baseUrl: config.userliUrl,
    token: config.userliToken,
    sieveLocation: config.toucherSieveLocation,
    useSudo: config.toucherUseSudo,
    logger,
  });
  const server = createJanitorServer({ secret: config.webhookSecret, store, seen, purger, logger });

  await new Promise<void>((listening) => {
    server.once("error", (error) => fail("cannot listen", error));
    server.listen({ host: config.listen.host, port: config.listen.port }, listening);
  });
  const bound = server.address();
  logger.info(
    {
      address: typeof bound === "object" && bound ? bound.address : bound,
      port: typeof bound === "object" && bound ? bound.port : config.listen.port,
      databasePath: store.path,
      seenDeliveriesPath: seen.path,
      retentionHours: config.purgerRetentionHours,
      purgerTickInterval: formatDuration(config.purgerTickIntervalMs),
      purgerCommand: config.purgerCommand,
      purgerCommandTimeout: formatDuration(config.purgerCommandTimeoutMs),
      toucherTickInterval: formatDuration(config.toucherTickIntervalMs),
      sieveLocation: config.toucherSieveLocation,
      useSudo: config.toucherUseSudo,
      serviceUrl: safeUrl(config.userliUrl),
      version: VERSION,
    },
    "listening",
  );

  const stopping = new AbortController();
  const loop = async (name: string, intervalMs: number, step: (signal: AbortSignal) => Promise<unknown>) => {
    while (!stopping.signal.aborted) {
      try {
        await step(stopping.signal);
      } catch (error) {
        logger.error(
          { component: name, err: error instanceof Error ? error.message : String(error) },
          `${name} tick failed`,
        );
      }
      await sleep(intervalMs, stopping.signal);
    }
  };
  const loops = Promise.all([
    loop("purger", config.purgerTickIntervalMs, (signal) => purger.tick(signal)),
    loop("toucher", config.toucherTickIntervalMs, (signal) => toucher.tick(signal)),
  ]);

  let shuttingDown = false;
  shutdown = async (signal: string) => {
    if (shuttingDown) {
      logger.warn({ signal }, "second signal: exiting at once");
      process.exit(1);
    }
    shuttingDown = true;
    logger.info({ signal }, "shutting down");
    stopping.abort();
    purger.stop();
    const closed = new Promise<void>((done) => server.close(() => done()));
    server.closeIdleConnections();
    const grace = setTimeout(() => {
      logger.warn("purge command still running at shutdown: ending it; its entry stays for the next start");
      purger.killRunning();
    }, SHUTDOWN_GRACE_MS);
    await closed;
    await loops;
    await purger.idle();
    clearTimeout(grace);
    await seen.idle();
    await store.close();
    logger.info("stopped");
    process.exit(0);
  };
}

await main();
