import type { FastifyInstance, RouteOptions } from "fastify";
import { InstallationSecret } from "../../src/config.ts";
import { CryptoPool } from "../../src/credentials/crypto-pool.ts";
import { openDatabase } from "../../src/db/database.ts";
import { migrateToLatest } from "../../src/db/migrate.ts";
import { buildApp } from "../../src/http/app.ts";
import { createLogger } from "../../src/logger.ts";
import { createServices, type ServiceOptions, type Services } from "../../src/services.ts";
import type { StoredScope } from "../../src/tokens/tokens.ts";
import { webInterface } from "../../src/web/plugin.ts";
import { notFoundPage } from "../../src/web/render.ts";
import { scratchDatabase } from "./databases.ts";
import { testInstallationSecret } from "./process.ts";

/** The tests' installation secret, as services are given it (the console's is the same). */
export const installationSecret = (): InstallationSecret =>
  new InstallationSecret(Buffer.from(testInstallationSecret, "hex"));

export interface TestService {
  url: string;
  services: Services;
  app: FastifyInstance;
  /** A fresh token with these scopes (either spelling). */
  token(...scopes: StoredScope[]): Promise<string>;
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface RequestOptions {
  token?: string;
  json?: unknown;
  form?: Record<string, string>;
  body?: string;
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  text: string;
  /** Parsed JSON body (undefined when the body is not JSON). */
  body: any;
}

/**
 * The real HTTP server on a free port over a real SQLite file in a temporary directory.
 * `TEST_DATABASE_URL` switches the whole API suite to another database.
 */
export interface StartOptions {
  metricsToken?: string;
  userliCompat?: boolean;
  /** TRUST_PROXY's value: client address and protocol from X-Forwarded-*. */
  trustProxy?: boolean | string;
  /** Serve the web pages too (as `npm start` does). */
  web?: boolean;
  pwnedPasswordsUrl?: string;
  /** Extra options for createServices (the e-mail relay, clocks; the tests' secret unless given). */
  serviceOptions?: Partial<ServiceOptions>;
  /** Told of every route the web interface registers (for a test that visits every page). */
  onWebRoute?: (route: RouteOptions) => void;
  /** Called with the SQL of every statement Kysely runs (BEGIN and COMMIT included): to count them. */
  onStatement?: (sql: string) => void;
  /** The crypto pool (a test that counts the derivations run through it); a pool of 2 otherwise. */
  pool?: CryptoPool;
}

export async function startService(options: StartOptions = {}): Promise<TestService> {
  const { url, remove } = await scratchDatabase("mas-test-");
  const { onStatement } = options;
  const database = await openDatabase(url, {
    poolSize: 4,
    ...(onStatement
      ? { log: (event) => (event.level === "query" ? onStatement(event.query.sql) : undefined) }
      : {}),
  });
  await migrateToLatest(database);
  const services = createServices(database, options.pool ?? new CryptoPool(2), {
    installationSecret: installationSecret(),
    pwnedPasswordsUrl: options.pwnedPasswordsUrl ?? null,
    ...options.serviceOptions,
  });
  const app = await buildApp({
    logger: createLogger("silent"),
    services,
    metricsToken: options.metricsToken ?? null,
    userliCompat: options.userliCompat ?? false,
    trustProxy: options.trustProxy ?? false,
    ...(options.web ? { web: { plugin: webPlugin(options.onWebRoute), notFound: notFoundPage } } : {}),
  });
  const address = await app.listen({ host: "127.0.0.1", port: 0 });

  const request = async (
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<TestResponse> => {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined = options.body;
    if (options.json !== undefined) {
      headers["content-type"] ??= "application/json";
      body = JSON.stringify(options.json);
    } else if (options.form) {
      headers["content-type"] ??= "application/x-www-form-urlencoded";
      body = new URLSearchParams(options.form).toString();
    }
    const response = await fetch(`${address}${path}`, { method, headers, body });
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text === "" ? undefined : JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: response.status, headers: response.headers, text, body: parsed };
  };

  return {
    url: address,
    services,
    app,
    token: async (...scopes) => (await services.tokens.create("test token", scopes)).plainToken,
    request,
    async close() {
      await app.close();
      await database.close();
      await remove();
    },
  };
}

/** The web interface, with its routes reported to `onWebRoute` when a test asks for them. */
const webPlugin =
  (onWebRoute?: (route: RouteOptions) => void): typeof webInterface =>
  async (scope, services) => {
    if (onWebRoute) scope.addHook("onRoute", onWebRoute);
    await webInterface(scope, services);
  };
