import { createBackground } from "./background.ts";
import { handleCommandLine } from "./command-line.ts";
import { ConfigError, loadConfig, readInstallationSecret, redactUrl } from "./config.ts";
import { CryptoPool, ensureThreadPoolSize } from "./credentials/crypto-pool.ts";
import { openDatabase } from "./db/database.ts";
import { migrateToLatest } from "./db/migrate.ts";
import { buildApp } from "./http/app.ts";
import { createLogger } from "./logger.ts";
import { createServices } from "./services.ts";
import { serviceVersion } from "./version.ts";
import { webInterface } from "./web/plugin.ts";
import { notFoundPage } from "./web/render.ts";

/** How long requests in flight may take to finish after SIGTERM before their connections are cut. */
const shutdownGraceMs = 5000;

/** config -> database -> services -> HTTP app -> listen; graceful shutdown on SIGTERM/SIGINT. */
async function main() {
  if (handleCommandLine(process.argv.slice(2))) return;
  const config = loadConfig();
  const installationSecret = readInstallationSecret(config.installationSecret);
  ensureThreadPoolSize(config.cryptoPoolSize);
  const logger = createLogger(config.logLevel);
  const database = await openDatabase(config.databaseUrl, {
    poolSize: config.databasePoolSize,
    preparedStatements: config.databasePreparedStatements,
  });
  const applied = await migrateToLatest(database);
  if (applied.length > 0) logger.info({ migrations: applied }, "database schema updated");
  const services = createServices(database, new CryptoPool(config.cryptoPoolSize), {
    installationSecret,
    pwnedPasswordsUrl: config.pwnedPasswordsUrl,
    // The owner's "someone is guessing" notice failed (it never changes an answer).
    onGuardError: (error) =>
      logger.warn({ err: error instanceof Error ? error.message : String(error) }, "guessing notice failed"),
    onPasswordLookupError: (error) =>
      logger.warn(
        { err: error instanceof Error ? error.message : String(error) },
        "leaked-password lookup failed",
      ),
    smtpUrl: config.smtpUrl,
  });
  const app = await buildApp({
    logger,
    services,
    metricsToken: config.metricsToken,
    userliCompat: config.userliCompat,
    trustProxy: config.trustProxy,
    timeouts: { request: config.requestTimeout, connection: config.connectionTimeout },
    ...(config.webEnabled ? { web: { plugin: webInterface, notFound: notFoundPage } } : {}),
  });
  const background = createBackground(services, logger, {
    webhooks: { retryDelays: config.webhookRetryDelays },
    smtpUrl: config.smtpUrl,
  });
  const address = await app.listen({ host: config.listen.host, port: config.listen.port });
  if (config.jobsEnabled) background.start();
  if (config.trustProxy === true)
    logger.warn(
      "TRUST_PROXY=true trusts every proxy: the client address is the left-most X-Forwarded-For entry, which any client can write (and so evade sign-in throttling and fake audit addresses); set TRUST_PROXY to the proxies' addresses instead",
    );
  if (!config.smtpUrl)
    logger.info("no SMTP_URL: no e-mail is sent to users (welcome, recovery started, alias created)");

  // A signal from here on is a graceful stop, whatever the start-up is still doing.
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    // Connections still busy after the grace period are cut, so a stop never hangs on a client.
    const cut = setTimeout(() => app.server.closeAllConnections(), shutdownGraceMs);
    cut.unref();
    try {
      // No new background work from this moment on, while the requests in flight finish.
      await Promise.all([app.close(), background.stop()]);
      await database.close();
    } catch (error) {
      logger.error({ err: error instanceof Error ? error.message : String(error) }, "shutdown failed");
      process.exit(1);
    }
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));

  logger.info(
    {
      address,
      version: serviceVersion,
      database: redactUrl(config.databaseUrl),
      dialect: database.dialect,
    },
    "listening",
  );
  // A stop during these reads closes the database under them: that is no failed start.
  const unlessStopping = (error: unknown) => {
    if (stopping) return null;
    throw error;
  };
  // The one secret logged on purpose: only while no administrator exists, so that the operator
  // (who reads this log) and nobody else can take the first steps of /init.
  const setupCode = await services.setup.openSetupCode().catch(unlessStopping);
  if (setupCode)
    logger.info(
      `set-up code: ${setupCode} (no administrator yet: open /init in the browser and enter this code; bin/console app:setup:code prints it again)`,
    );
  const tokens = await services.tokens.list().catch(unlessStopping);
  if (tokens?.length === 0) {
    logger.info(
      "no API token yet: create one with  bin/console app:api-token:create --name dovecot --scopes mailbox-server",
    );
  }
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`config error: ${error.message}\n`);
  } else {
    process.stderr.write(`start failed: ${error instanceof Error ? error.message : String(error)}\n`);
  }
  process.exit(1);
});
