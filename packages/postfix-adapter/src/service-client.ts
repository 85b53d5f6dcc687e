/**
 * The account service's `mta` endpoints over HTTP, through one keep-alive connection pool
 * (http-client.ts).
 *
 * Every method either gives the service's answer or throws ServiceUnavailable: the service could
 * not be reached, did not answer within SERVICE_TIMEOUT, answered 5xx or 429, refused our token, or
 * answered something we do not understand. The callers turn that into TEMP (socketmap), a
 * temporary SASL failure (fail closed) or DUNNO (policy, fail open); never into "not found".
 */
import { isIP } from "node:net";
import type { Logger } from "pino";
import { HttpError, HttpPool } from "./http-client.ts";
import type { CounterSeries, HistogramSeries, Metrics } from "./metrics.ts";

/** At most this many connections to the service; more requests wait for a free one. */
const POOL_SIZE = 64;
/** Larger answers are refused (an alias with thousands of destinations still fits). */
const MAX_BODY_BYTES = 1024 * 1024;

/**
 * The pool to the service, as the adapter uses it (the benchmark's direct runs use it too, so both
 * sides of its ratio ask the service the same way). SERVICE_TIMEOUT bounds each request from the
 * moment it is asked to the end of its answer.
 */
export function createServicePool(base: URL, timeoutMs: number, connections = POOL_SIZE): HttpPool {
  return new HttpPool({ url: base, maxConnections: connections, timeoutMs, maxBodyBytes: MAX_BODY_BYTES });
}

export class ServiceUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ServiceUnavailable";
  }
}

export interface SmtpQuota {
  perHour: number;
  perDay: number;
}

/** What POST /api/mta/auth said about the user (token problems and outages throw instead). */
export type AuthVerdict = "success" | "failed" | "disabled" | "password-change";

interface Answer {
  status: number;
  body: unknown;
}

export interface ServiceClientOptions {
  baseUrl: string;
  token: string;
  timeoutMs: number;
  logger: Logger;
  metrics: Metrics;
}

/**
 * A key as one path segment: percent-encoded, and `.`/`..` encoded too, since a path normaliser
 * on the way (a reverse proxy) would otherwise resolve them.
 */
export function pathSegment(key: string): string {
  if (key === "." || key === "..") return key.replace(/\./g, "%2E");
  return encodeURIComponent(key);
}

/** One endpoint's metric series, found once (every lookup updates them). */
interface EndpointSeries {
  duration: HistogramSeries;
  /** Requests per outcome: the HTTP status, "timeout" or "error". */
  outcomes: Map<string, CounterSeries>;
}

function unexpected(endpoint: string, answer: Answer): ServiceUnavailable {
  return new ServiceUnavailable(`unexpected answer from ${endpoint}: HTTP ${answer.status}`);
}

export class ServiceClient {
  readonly #base: URL;
  readonly #basePath: string;
  readonly #pool: HttpPool;
  /** The header lines of every lookup, and of every sign-in (built once: they never change). */
  readonly #lookupHeaders: string;
  readonly #authHeaders: string;
  readonly #logger: Logger;
  readonly #metrics: Metrics;
  readonly #series = new Map<string, EndpointSeries>();
  /** Set while the service fails: one log line when it goes away, one when it is back. */
  #down = false;

  constructor(options: ServiceClientOptions) {
    this.#base = new URL(options.baseUrl);
    this.#basePath = this.#base.pathname.replace(/\/+$/, "");
    this.#pool = createServicePool(this.#base, options.timeoutMs);
    this.#lookupHeaders = `authorization: Bearer ${options.token}\r\naccept: application/json\r\n`;
    this.#authHeaders = `${this.#lookupHeaders}content-type: application/json\r\n`;
    this.#logger = options.logger;
    this.#metrics = options.metrics;
  }

  /** true/false as the service says; null when the key cannot be a domain name (400). */
  domain(domain: string): Promise<boolean | null> {
    return this.#get("domain", domain, this.#boolean);
  }

  mailbox(email: string): Promise<boolean | null> {
    return this.#get("mailbox", email, this.#boolean);
  }

  alias(email: string): Promise<string[] | null> {
    return this.#get("alias", email, this.#list);
  }

  senders(email: string): Promise<string[] | null> {
    return this.#get("senders", email, this.#list);
  }

  /** The sender's limits (0 = unlimited); null when the service knows no such sender (404, 400). */
  smtpQuota(email: string): Promise<SmtpQuota | null> {
    return this.#get("smtp_quota", email, this.#quota);
  }

  /**
   * POST /api/mta/auth. `clientAddress` (the SMTP client's IP) goes along as X-Client-Address so the
   * service can throttle per address; anything that is not an IP address is left out.
   */
  authenticate(email: string, password: string, clientAddress?: string): Promise<AuthVerdict> {
    let headers = this.#authHeaders;
    if (clientAddress && isIP(clientAddress) !== 0) headers += `x-client-address: ${clientAddress}\r\n`;
    const body = JSON.stringify({ email, password });
    return this.#request("auth", "POST", "/api/mta/auth", headers, body, this.#verdict);
  }

  /** Closes the pool: requests under way are answered first, new ones fail. */
  close(): Promise<void> {
    return this.#pool.close();
  }

  // What each endpoint's answer means; anything else throws ServiceUnavailable.

  readonly #boolean = (answer: Answer): boolean | null => {
    if (answer.status === 400) return null;
    if (answer.status === 200 && typeof answer.body === "boolean") return answer.body;
    throw unexpected("lookup", answer);
  };

  readonly #list = (answer: Answer): string[] | null => {
    if (answer.status === 400) return null;
    if (
      answer.status === 200 &&
      Array.isArray(answer.body) &&
      answer.body.every((e) => typeof e === "string")
    ) {
      return answer.body as string[];
    }
    throw unexpected("lookup", answer);
  };

  readonly #quota = (answer: Answer): SmtpQuota | null => {
    if (answer.status === 404 || answer.status === 400) return null;
    const body = answer.body as { per_hour?: unknown; per_day?: unknown } | null;
    if (answer.status === 200 && body && typeof body === "object") {
      const { per_hour: perHour, per_day: perDay } = body;
      if (Number.isSafeInteger(perHour) && Number.isSafeInteger(perDay)) {
        return { perHour: Math.max(0, perHour as number), perDay: Math.max(0, perDay as number) };
      }
    }
    throw unexpected("smtp_quota", answer);
  };

  readonly #verdict = (answer: Answer): AuthVerdict => {
    const message = (answer.body as { message?: unknown } | null)?.message;
    switch (answer.status) {
      case 200:
        return "success";
      case 401:
        return "failed";
      case 403:
        if (message === "user disabled due to spam role") return "disabled";
        if (message === "user password change required") return "password-change";
        break;
      case 400:
      case 422:
        // An address or password the service refuses as input: it cannot be a valid sign-in.
        return "failed";
    }
    throw unexpected("auth", answer);
  };

  #get<T>(endpoint: string, key: string, interpret: (answer: Answer) => T): Promise<T> {
    const path = `/api/mta/${endpoint}/${pathSegment(key)}`;
    return this.#request(endpoint, "GET", path, this.#lookupHeaders, undefined, interpret);
  }

  /**
   * One request, with its metrics; any failure becomes ServiceUnavailable. A lookup (GET,
   * read-only) whose connection broke before its answer goes out once more on another connection;
   * a sign-in is never sent twice: the service may have checked (and counted) the password before
   * the connection broke, so that failure stands (FAIL temp, Postfix's client tries again).
   */
  async #request<T>(
    endpoint: string,
    method: "GET" | "POST",
    path: string,
    headers: string,
    body: string | undefined,
    interpret: (answer: Answer) => T,
  ): Promise<T> {
    const started = performance.now();
    let outcome = "error";
    try {
      const http = await this.#pool.request(method, this.#basePath + path, headers, body, method === "GET");
      let parsed: unknown = null;
      if (http.body.length > 0) {
        try {
          parsed = JSON.parse(http.body.toString("utf8"));
        } catch {
          parsed = null;
        }
      }
      const answer = { status: http.status, body: parsed };
      outcome = String(answer.status);
      this.#check(endpoint, answer);
      const result = interpret(answer);
      if (this.#down) {
        this.#down = false;
        this.#logger.info("account service reachable again");
      }
      return result;
    } catch (error) {
      if (error instanceof HttpError && error.kind === "timeout") outcome = "timeout";
      const unavailable =
        error instanceof ServiceUnavailable
          ? error
          : new ServiceUnavailable(error instanceof Error ? error.message : String(error));
      this.#failed(unavailable);
      throw unavailable;
    } finally {
      let series = this.#series.get(endpoint);
      if (!series) {
        series = { duration: this.#metrics.serviceDuration.series({ endpoint }), outcomes: new Map() };
        this.#series.set(endpoint, series);
      }
      let requests = series.outcomes.get(outcome);
      if (!requests) {
        requests = this.#metrics.serviceRequests.series({ endpoint, outcome });
        series.outcomes.set(outcome, requests);
      }
      requests.value += 1;
      series.duration.observe((performance.now() - started) / 1000);
    }
  }

  /** Answers that mean "ask again later", whatever the endpoint. */
  #check(endpoint: string, answer: Answer): void {
    const body = answer.body as { message?: unknown; error?: unknown } | null;
    if (answer.status >= 500 || answer.status === 429 || answer.status === 408) {
      throw new ServiceUnavailable(`${endpoint}: HTTP ${answer.status}`);
    }
    // The token guard's answers carry `error` (401) or name the scope (403); a refused sign-in does not.
    if (answer.status === 401 && body && typeof body === "object" && "error" in body) {
      throw new ServiceUnavailable(`the service refused SERVICE_TOKEN: ${String(body.message)}`);
    }
    if (answer.status === 403 && typeof body?.message === "string" && body.message.startsWith("Token ")) {
      throw new ServiceUnavailable(`the service refused SERVICE_TOKEN: ${body.message}`);
    }
    if (answer.status === 404 && body?.message === "Not found") {
      throw new ServiceUnavailable(`${endpoint}: no such route (is SERVICE_URL the service's base URL?)`);
    }
  }

  #failed(error: ServiceUnavailable): void {
    if (!this.#down) {
      this.#down = true;
      this.#logger.error(
        { err: error.message },
        "account service unavailable: lookups answer TEMP, sign-ins fail",
      );
    } else {
      this.#logger.debug({ err: error.message }, "account service still unavailable");
    }
  }
}
