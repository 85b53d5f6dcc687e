import formBody from "@fastify/formbody";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type HTTPMethods,
  LogController,
} from "fastify";
import { type Logger, RequestLogger } from "../logger.ts";
import type { Services } from "../services.ts";
import { adminApi } from "./admin/plugin.ts";
import { afterAnnouncedBody, answersBeforeAnnouncedBody } from "./announced-body.ts";
import { clientErrorHandler, errorHandler, frameworkErrorHandler } from "./errors.ts";
import { healthRoutes } from "./health.ts";
import { integrationApi } from "./integration/plugin.ts";
import { metricsRoutes } from "./metrics.ts";
import { noStoreForSecrets } from "./no-store.ts";
import { openApiDocument } from "./openapi.ts";
import { refuseNul } from "./params.ts";
import { isSitePath, siteRoot } from "./site-location.ts";
import { wellKnownRoutes } from "./well-known.ts";

export const bodyLimit = 64 * 1024;
/** Node's default `maxHeaderSize`, which the request line counts against. */
const maxUrlBytes = 16 * 1024;
const shuttingDown = JSON.stringify({ message: "shutting down, try again" });
const answeredMethods: HTTPMethods[] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/** How often Node looks for requests past their time: a quarter of it, between 1 s and 30 s. */
const checkingInterval = (requestSeconds: number): number =>
  Math.min(30_000, Math.max(1000, (requestSeconds * 1000) / 4));

/** Node's 60 s for the headers, or less when the whole request has less. */
const headersTimeout = (requestSeconds: number): number =>
  requestSeconds === 0 ? 60_000 : Math.min(60_000, requestSeconds * 1000);

export interface AppOptions {
  logger: Logger;
  services: Services;
  metricsToken?: string | null;
  /** USERLI_COMPAT: the integration API also under userli's path prefixes. */
  userliCompat?: boolean;
  /** TRUST_PROXY: client address and protocol from X-Forwarded-* (set when behind a reverse proxy). */
  trustProxy?: boolean | string;
  /** REQUEST_TIMEOUT and CONNECTION_TIMEOUT, in seconds (0: no limit); defaults as in config.ts. */
  timeouts?: { request: number; connection: number };
  /** The web interface (pages for people); registered by main.ts, absent in API-only tests. */
  web?: WebSurface;
}

/** The web interface as the app sees it: its plugin and its HTML page for unknown paths. */
export interface WebSurface {
  plugin: (scope: FastifyInstance, services: Services) => Promise<void>;
  notFound: (request: FastifyRequest, reply: FastifyReply) => unknown;
}

export async function buildApp({
  logger,
  services,
  metricsToken = null,
  userliCompat = false,
  trustProxy = false,
  timeouts = { request: 60, connection: 120 },
  web,
}: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    bodyLimit,
    trustProxy,
    // A client dribbling its request (slowloris) is cut once the whole request took longer than
    // `request`, checked every quarter of it (at most 30 s, Node's interval), so the cut comes at
    // most 1.25 x `request` after its start. Idle keep-alive connections between requests are no
    // request: they stay open for Fastify's keepAliveTimeout (72 s), which Dovecot's and Postfix's
    // adapters rely on. `connection` cuts a connection silent that long during a request.
    requestTimeout: timeouts.request * 1000,
    connectionTimeout: timeouts.connection * 1000,
    http: {
      connectionsCheckingInterval: checkingInterval(timeouts.request),
      // Node swaps the two when the headers' limit is the larger, so the request's would become 60 s.
      headersTimeout: headersTimeout(timeouts.request),
    },
    // No path parameter is cut short by the router (its 414 would echo the URL): a whole request
    // line fits in Node's 16 KiB header limit, and each route's own check answers a too long
    // address 400 "invalid e-mail address" (or domain name) like any other bad one.
    routerOptions: { maxParamLength: maxUrlBytes },
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
    // Per-request lines are written by our own onResponse hook (debug), without bodies or headers.
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: (parent, bindings, options) =>
      new RequestLogger(parent as Logger, bindings, options) as unknown as FastifyBaseLogger,
    // Our own 503 while closing (the onRequest hook below): Fastify's names its error and status code.
    return503OnClosing: false,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false } },
  });
  app.decorateRequest("apiToken", undefined);
  // Many clients send `Content-Type: application/json` on every request, bodiless DELETEs and
  // touches included: an empty JSON body means "no body" (a route that needs one answers 422, as
  // the reference does), anything else goes to Fastify's own parser (prototype poisoning refused).
  const jsonParser = app.getDefaultJsonParser("error", "error");
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    const text = body.toString();
    if (text.trim() === "") return done(null, undefined);
    jsonParser(request, text, done);
  });
  // Once the app is closing, every answer still being made says `Connection: close`, so its
  // keep-alive connection ends with it instead of holding the close up (idle ones are closed at
  // once by Fastify, and requests arriving meanwhile get a 503).
  let closing = false;
  app.addHook("preClose", (done) => {
    closing = true;
    done();
  });
  app.addHook("onSend", (request, reply, payload, done) => {
    if (closing) reply.header("connection", "close");
    // No redirect leaves the site, whoever made it (a page, the language switch, a plugin).
    const location = reply.getHeader("location");
    if (location !== undefined && !isSitePath(String(location))) reply.header("location", siteRoot);
    // An answer made before an announced body waits for it (announced-body.ts: Dovecot).
    if (!answersBeforeAnnouncedBody(request.raw, bodyLimit)) return done(null, payload);
    afterAnnouncedBody(request.raw, bodyLimit, () => done(null, payload));
  });
  // A request whose headers complete once the close has begun is not started. A callback hook
  // (no promise per request): one comparison on every request. Sent as text, past the route's
  // response schema, which describes its own 503 (health's is another shape).
  app.addHook("onRequest", (_request, reply, done) => {
    if (!closing) return done();
    reply.code(503).type("application/json; charset=utf-8").send(shuttingDown);
  });
  app.addHook("preValidation", refuseNul);
  // A request whose client has hung up is not handled (no page rendered, no guard consulted): a flood
  // of abandoned requests costs no work (docs/security.md). A callback hook: one read per request.
  app.addHook("preHandler", (_request, reply, done) => {
    if (!reply.raw.destroyed) return done();
    reply.hijack();
  });
  app.setErrorHandler(errorHandler);
  // Unknown paths of the APIs answer JSON; any other is a page a person may have typed.
  app.setNotFoundHandler((request, reply) =>
    web && !/^\/(api|\.well-known)(\/|$)/.test(request.url)
      ? web.notFound(request, reply)
      : reply.code(404).send({ message: "Not found" }),
  );
  const { metrics } = services;
  // A callback hook, not an async one: no promise per request (bench/README.md#instructions-per-request).
  app.addHook("onResponse", (request, reply, done) => {
    const route = request.routeOptions.url ?? "unmatched";
    metrics.requests.inc({ method: request.method, route, status: reply.statusCode });
    metrics.requestDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
    request.log.debug({ method: request.method, route, status: reply.statusCode }, "request");
    done();
  });

  app.addHook("onRoute", noStoreForSecrets);
  const routesByUrl = new Map<string, Set<string>>();
  app.addHook("onRoute", (route) => {
    const methods = routesByUrl.get(route.url) ?? new Set<string>();
    for (const method of [route.method].flat()) methods.add(method);
    routesByUrl.set(route.url, methods);
  });

  await openApiDocument(app);
  await app.register(formBody, { bodyLimit });
  await app.register(async (scope) => integrationApi(scope, services, { userliCompat }));
  await app.register(async (scope) => wellKnownRoutes(scope, services));
  await app.register(async (scope) => adminApi(scope, services));
  await app.register(async (scope) => healthRoutes(scope, services));
  await app.register(async (scope) => metricsRoutes(scope, services, metricsToken));
  if (web) await app.register(async (scope) => web.plugin(scope, services));

  // A known path with another method is a 405 that names the allowed methods, before any token check.
  for (const [url, methods] of [...routesByUrl]) {
    const missing = answeredMethods.filter((method) => !methods.has(method));
    if (missing.length === 0) continue;
    const allow = [...methods].join(", ");
    app.route({
      method: missing,
      url,
      handler: async (_request, reply) =>
        reply.code(405).header("Allow", allow).send({ message: "Method not allowed" }),
    });
  }
  return app;
}
