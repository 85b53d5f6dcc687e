/**
 * The Postfix adapter: config -> service client and quota counters -> the socketmap, SASL and
 * policy listeners and the metrics listener. SIGTERM/SIGINT: stop accepting, let running requests
 * finish (up to SERVICE_TIMEOUT and a second), close, exit 0.
 */
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import {
  type Config,
  ConfigError,
  formatListenAddress,
  type ListenAddress,
  loadConfig,
  safeRedisUrl,
} from "./config.ts";
import { createLogger } from "./logger.ts";
import { MemoryCounters } from "./memory.ts";
import { createMetricsServer, Metrics } from "./metrics.ts";
import { createPolicyListener, type QuotaCounters } from "./policy.ts";
import { RedisCounters } from "./redis.ts";
import { createSaslListener } from "./sasl.ts";
import { ServiceClient } from "./service-client.ts";
import { createSocketmapListener } from "./socketmap.ts";
import type { Listener } from "./tcp.ts";

/** Exit code for configuration errors (sysexits EX_CONFIG); the systemd unit does not restart on it. */
const EXIT_CONFIG = 78;

const VERSION = (
  JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
).version;

const USAGE = `postfix-adapter: socketmap, SASL and policy servers for Postfix, backed by the account service.
Configured through environment variables (see docs/postfix-adapter.md):
  SERVICE_URL (required)                 base URL of the account service
  SERVICE_TOKEN (required)               API token with scope mta
  SOCKETMAP_LISTEN_ADDR=127.0.0.1:10001  socketmap lookups (maps domain, mailbox, alias, senders)
  SASL_LISTEN_ADDR=127.0.0.1:10002       Dovecot-protocol SASL server (smtpd_sasl_type = dovecot)
  POLICY_LISTEN_ADDR=127.0.0.1:10003     policy server enforcing the sending quotas
  METRICS_LISTEN_ADDR=127.0.0.1:10005    HTTP: GET /health and GET /metrics (Prometheus)
                                         each listener: host:port, [v6addr]:port, :port or off
  REDIS_URL (unset)                      redis://host:6379/0 to share quota counters between
                                         adapters; unset: counters in this process's memory
  SERVICE_TIMEOUT=2s                     limit for one request to the service (and to Redis)
  LOG_LEVEL=info                         debug, info, warn or error
`;

async function main(): Promise<void> {
  if (process.argv.includes("--help") || process.argv.includes("-h")) {
    process.stdout.write(USAGE);
    return;
  }
  if (process.argv.includes("--version") || process.argv.includes("-V")) {
    process.stdout.write(`postfix-adapter ${VERSION} (Node.js ${process.versions.node})\n`);
    return;
  }
  const unknown = process.argv.slice(2);
  if (unknown.length > 0) {
    process.stderr.write(
      `unknown argument: ${unknown[0]} (the adapter is configured by environment variables; see --help)\n`,
    );
    process.exit(2);
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
  const metrics = new Metrics();
  metrics.buildInfo.set({ version: VERSION, node: process.versions.node }, 1);
  const client = new ServiceClient({
    baseUrl: config.serviceUrl,
    token: config.serviceToken,
    timeoutMs: config.serviceTimeoutMs,
    logger,
    metrics,
  });

  let counters: QuotaCounters;
  if (config.redisUrl) {
    const redis = new RedisCounters({
      url: config.redisUrl,
      timeoutMs: config.serviceTimeoutMs,
      logger,
      metrics,
    });
    counters = redis;
    // Not required to start: until Redis answers, the policy lets mail pass (and logs it).
    if (!(await redis.waitReady(config.serviceTimeoutMs))) {
      logger.warn(
        { redis: safeRedisUrl(config.redisUrl) },
        "redis not reachable yet: quotas not enforced until it is",
      );
    }
  } else {
    counters = new MemoryCounters();
  }

  let stopping = false;
  const listeners: Array<{ listener: Listener; address: ListenAddress }> = [];
  if (config.socketmapListen) {
    listeners.push({
      listener: createSocketmapListener({ client, logger, metrics }),
      address: config.socketmapListen,
    });
  }
  if (config.saslListen) {
    listeners.push({ listener: createSaslListener({ client, logger, metrics }), address: config.saslListen });
  }
  if (config.policyListen) {
    listeners.push({
      listener: createPolicyListener({ client, counters, logger, metrics }),
      address: config.policyListen,
    });
  }
  const metricsServer = config.metricsListen
    ? createMetricsServer(metrics, () => ({ stopping, redis: config.redisUrl ? counters.state() : "off" }))
    : null;

  const fail = (message: string, error: unknown): never => {
    logger.fatal({ err: error instanceof Error ? error.message : String(error) }, message);
    process.exit(1);
  };
  const bound: Record<string, string> = {};
  for (const { listener, address } of listeners) {
    try {
      const info = await listener.listen(address);
      bound[listener.name] = formatListenAddress({ host: info.address, port: info.port });
    } catch (error) {
      fail(`cannot listen for ${listener.name} on ${formatListenAddress(address)}`, error);
    }
  }
  if (metricsServer && config.metricsListen) {
    const address = config.metricsListen;
    await new Promise<void>((resolve) => {
      metricsServer.once("error", (error) =>
        fail(`cannot listen for metrics on ${formatListenAddress(address)}`, error),
      );
      metricsServer.listen({ host: address.host, port: address.port }, () => resolve());
    });
    const info = metricsServer.address() as AddressInfo;
    bound["metrics"] = formatListenAddress({ host: info.address, port: info.port });
  }
  if (listeners.length === 0) logger.warn("every protocol listener is off: the adapter answers nothing");

  logger.info(
    {
      socketmap: bound["socketmap"] ?? "off",
      sasl: bound["sasl"] ?? "off",
      policy: bound["policy"] ?? "off",
      metrics: bound["metrics"] ?? "off",
      counters: counters.kind,
      ...(config.redisUrl ? { redis: safeRedisUrl(config.redisUrl) } : {}),
      serviceUrl: config.serviceUrl,
      serviceTimeoutMs: config.serviceTimeoutMs,
      version: VERSION,
    },
    "listening",
  );

  const shutdown = async (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, "second signal: exiting at once");
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, "shutting down");
    await Promise.all(listeners.map(({ listener }) => listener.close(config.serviceTimeoutMs + 1000)));
    if (metricsServer) {
      const closed = new Promise<void>((done) => metricsServer.close(() => done()));
      metricsServer.closeAllConnections();
      await closed;
    }
    await counters.close();
    client.close();
    logger.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}

await main();
