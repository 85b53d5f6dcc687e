/**
 * Prometheus metrics (text format 0.0.4) and the HTTP listener serving them beside /health.
 * Written by hand: a handful of counters, gauges and histograms do not need a library.
 */
import { createServer, type Server } from "node:http";

type Labels = Record<string, string>;

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

function labelText(labels: Labels, extra?: [string, string]): string {
  const pairs = Object.entries(labels);
  if (extra) pairs.push(extra);
  if (pairs.length === 0) return "";
  return `{${pairs.map(([name, value]) => `${name}="${escapeLabel(value)}"`).join(",")}}`;
}

/** A series' identity: names and values in the caller's order (each call site writes its labels in one order). */
function key(labels: Labels): string {
  let id = "";
  for (const name in labels) id += `${name}\u0000${labels[name]}\u0001`;
  return id;
}

interface Metric {
  render(): string;
}

/** One labelled series of a counter or gauge. Hot paths keep it and add to it without a lookup. */
export class CounterSeries {
  readonly labels: Labels;
  value = 0;

  constructor(labels: Labels) {
    this.labels = labels;
  }

  inc(by = 1): void {
    this.value += by;
  }
}

class Counter implements Metric {
  readonly #series = new Map<string, CounterSeries>();
  readonly name: string;
  readonly help: string;
  readonly type: "counter" | "gauge";

  constructor(name: string, help: string, type: "counter" | "gauge" = "counter") {
    this.name = name;
    this.help = help;
    this.type = type;
  }

  series(labels: Labels = {}): CounterSeries {
    const id = key(labels);
    let series = this.#series.get(id);
    if (!series) {
      series = new CounterSeries(labels);
      this.#series.set(id, series);
    }
    return series;
  }

  inc(labels: Labels = {}, by = 1): void {
    this.series(labels).value += by;
  }

  set(labels: Labels, value: number): void {
    this.series(labels).value = value;
  }

  get(labels: Labels = {}): number {
    return this.#series.get(key(labels))?.value ?? 0;
  }

  render(): string {
    let out = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} ${this.type}\n`;
    for (const { labels, value } of this.#series.values())
      out += `${this.name}${labelText(labels)} ${value}\n`;
    return out;
  }
}

/** Upper bounds in seconds: lookups take about a millisecond, sign-ins (Argon2) a few hundred. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** One labelled series of a histogram. Counts per bucket, not cumulative: made cumulative when rendered. */
export class HistogramSeries {
  readonly labels: Labels;
  /** One per bound, and the last for everything above the largest. */
  readonly counts: number[] = new Array(BUCKETS.length + 1).fill(0);
  sum = 0;
  count = 0;

  constructor(labels: Labels) {
    this.labels = labels;
  }

  observe(seconds: number): void {
    let bucket = 0;
    while (bucket < BUCKETS.length && seconds > (BUCKETS[bucket] as number)) bucket += 1;
    this.counts[bucket]! += 1;
    this.sum += seconds;
    this.count += 1;
  }
}

class Histogram implements Metric {
  readonly #series = new Map<string, HistogramSeries>();
  readonly name: string;
  readonly help: string;

  constructor(name: string, help: string) {
    this.name = name;
    this.help = help;
  }

  series(labels: Labels): HistogramSeries {
    const id = key(labels);
    let series = this.#series.get(id);
    if (!series) {
      series = new HistogramSeries(labels);
      this.#series.set(id, series);
    }
    return series;
  }

  observe(labels: Labels, seconds: number): void {
    this.series(labels).observe(seconds);
  }

  render(): string {
    let out = `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} histogram\n`;
    for (const { labels, counts, sum, count } of this.#series.values()) {
      let cumulative = 0;
      BUCKETS.forEach((bound, i) => {
        cumulative += counts[i] as number;
        out += `${this.name}_bucket${labelText(labels, ["le", String(bound)])} ${cumulative}\n`;
      });
      out += `${this.name}_bucket${labelText(labels, ["le", "+Inf"])} ${count}\n`;
      out += `${this.name}_sum${labelText(labels)} ${sum}\n`;
      out += `${this.name}_count${labelText(labels)} ${count}\n`;
    }
    return out;
  }
}

/** Every metric the adapter exports; one instance per process, handed to each server. */
export class Metrics {
  readonly buildInfo = new Counter(
    "postfix_adapter_build_info",
    "Version of the adapter and of Node.js",
    "gauge",
  );
  readonly connections = new Counter(
    "postfix_adapter_connections",
    "Open client connections per listener",
    "gauge",
  );
  readonly protocolErrors = new Counter(
    "postfix_adapter_protocol_errors_total",
    "Connections closed for bad input, per listener and kind",
  );
  readonly socketmapLookups = new Counter(
    "postfix_adapter_socketmap_lookups_total",
    "Socketmap lookups per map and answer (ok, notfound, temp, perm)",
  );
  readonly socketmapDuration = new Histogram(
    "postfix_adapter_socketmap_lookup_duration_seconds",
    "Time from a socketmap request to its answer, per map",
  );
  readonly policyRequests = new Counter(
    "postfix_adapter_policy_requests_total",
    "Policy answers per action and reason",
  );
  readonly policyFailOpen = new Counter(
    "postfix_adapter_policy_fail_open_total",
    "Policy requests let through because the service or Redis could not be asked",
  );
  readonly saslAuthentications = new Counter(
    "postfix_adapter_sasl_authentications_total",
    "SASL authentications per mechanism and result (success, failure, tempfail)",
  );
  readonly serviceRequests = new Counter(
    "postfix_adapter_service_requests_total",
    "Requests to the account service per endpoint and outcome (HTTP status, timeout, error)",
  );
  readonly serviceDuration = new Histogram(
    "postfix_adapter_service_request_duration_seconds",
    "Duration of requests to the account service per endpoint",
  );
  readonly redisUp = new Counter(
    "postfix_adapter_redis_up",
    "1 while the Redis connection for the quota counters is ready (absent without REDIS_URL)",
    "gauge",
  );

  render(): string {
    return [
      this.buildInfo,
      this.connections,
      this.protocolErrors,
      this.socketmapLookups,
      this.socketmapDuration,
      this.policyRequests,
      this.policyFailOpen,
      this.saslAuthentications,
      this.serviceRequests,
      this.serviceDuration,
      this.redisUp,
    ]
      .map((metric: Metric) => metric.render())
      .join("");
  }
}

/**
 * GET /health (200 while running, 503 once shutdown began) and GET /metrics. No token: the
 * listener binds 127.0.0.1 by default; the figures hold no personal data.
 */
export function createMetricsServer(
  metrics: Metrics,
  status: () => { stopping: boolean; redis: string },
): Server {
  return createServer((request, response) => {
    const path = (request.url ?? "/").split("?")[0];
    if (request.method !== "GET" && request.method !== "HEAD") {
      response.writeHead(405, { allow: "GET, HEAD", "content-type": "application/json" });
      response.end('{"message":"Method not allowed"}');
      return;
    }
    if (path === "/health") {
      const { stopping, redis } = status();
      response.writeHead(stopping ? 503 : 200, {
        "content-type": "application/json",
        "cache-control": "no-store",
      });
      response.end(JSON.stringify({ status: stopping ? "stopping" : "ok", redis }));
      return;
    }
    if (path === "/metrics") {
      response.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
      response.end(metrics.render());
      return;
    }
    response.writeHead(404, { "content-type": "application/json" });
    response.end('{"message":"Not found"}');
  });
}
