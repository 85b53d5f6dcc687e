/**
 * Runs one autocannon load in its own process (the fallback when wrk is not installed) and prints
 * the figures as one JSON line. Keys come from the list file, walked in its (shuffled) order.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

interface Job {
  url: string;
  listFile: string;
  method: "GET" | "POST";
  token?: string;
  cookie?: string;
  connections: number;
  seconds: number;
  delayMs: number;
  timeoutSeconds: number;
}

interface AutocannonRequest {
  method?: string;
  path?: string;
  body?: string;
  headers?: Record<string, string>;
}

interface AutocannonResult {
  requests: { total: number };
  latency: { p50: number; p90: number; p99: number; max: number };
  duration: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

type Autocannon = (options: Record<string, unknown>) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;

const job = JSON.parse(process.argv[2] ?? "{}") as Job;
const lines = readFileSync(job.listFile, "utf8").split("\n").filter(Boolean);
// path, then optionally the body and the client's address (X-Client-Address), tab-separated
const requests = lines.map((line) => {
  const [path = "", body = "", clientAddress = ""] = line.split("\t");
  return { path, ...(body === "" ? {} : { body }), ...(clientAddress === "" ? {} : { clientAddress }) };
});
let index = 0;
const headers: Record<string, string> = {};
if (job.token) headers.authorization = `Bearer ${job.token}`;
if (job.cookie) headers.cookie = job.cookie;
if (job.method === "POST") headers["content-type"] = "application/json";

const result = await autocannon({
  url: job.url,
  connections: job.connections,
  duration: job.seconds,
  timeout: job.timeoutSeconds,
  method: job.method,
  headers,
  ...(job.delayMs > 0 ? { connectionRate: 1000 / job.delayMs } : {}),
  requests: [
    {
      setupRequest(request: AutocannonRequest): AutocannonRequest {
        const next = requests[index++ % requests.length]!;
        request.path = next.path;
        if (next.body !== undefined) request.body = next.body;
        if (next.clientAddress !== undefined)
          request.headers = { ...headers, "x-client-address": next.clientAddress };
        return request;
      },
    },
  ],
});
const seconds = result.duration;
process.stdout.write(
  `AUTOCANNON_JSON ${JSON.stringify({
    seconds,
    requests: result.requests.total,
    rps: result.requests.total / seconds,
    p50Ms: result.latency.p50,
    p90Ms: result.latency.p90,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  })}\n`,
);
