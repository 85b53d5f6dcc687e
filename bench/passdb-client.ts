import { Agent, request } from "node:http";
import type { KeyedRequest } from "./dataset.ts";

/** Closed-loop passdb load: what came back within the measured window. */
export interface PassdbResult {
  concurrency: number;
  seconds: number;
  completed: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Answers by status code (all 200 when every sign-in succeeds). */
  statuses: Record<string, number>;
  errors: number;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

function post(agent: Agent, url: URL, token: string, item: KeyedRequest): Promise<number> {
  return new Promise((resolve, reject) => {
    const body = Buffer.from(item.body ?? "");
    const req = request(
      {
        agent,
        host: url.hostname,
        port: url.port,
        method: "POST",
        path: item.path,
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          "content-length": body.length,
        },
      },
      (response) => {
        response.resume();
        response.on("end", () => resolve(response.statusCode ?? 0));
        response.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * `concurrency` loops, each sending its next sign-in when the last one is answered, until `seconds`
 * have passed; requests still in flight then are awaited (so the service is idle afterwards) but
 * not counted. With `seconds` 0, each loop sends exactly one request (the burst of the memory run).
 */
export async function runPassdb(
  baseUrl: string,
  token: string,
  list: KeyedRequest[],
  concurrency: number,
  seconds: number,
): Promise<PassdbResult> {
  const url = new URL(baseUrl);
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let errors = 0;
  let next = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const once = seconds === 0;
  // A window in which nothing completed (a short smoke run on a slow host: a queued sign-in can
  // take longer than the window) stays open until the first answer or error, for a minute at most,
  // so every run measures at least one sign-in; the figure then covers that longer time.
  const giveUp = deadline + 60_000;
  const inWindow = () => {
    const now = performance.now();
    return now <= deadline || (latencies.length + errors === 0 && now < giveUp);
  };
  let lastCompletion = started;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      do {
        const item = list[next++ % list.length]!;
        const t = performance.now();
        try {
          const status = await post(agent, url, token, item);
          if (once || inWindow()) {
            lastCompletion = performance.now();
            latencies.push(lastCompletion - t);
            statuses[status] = (statuses[status] ?? 0) + 1;
          }
        } catch {
          errors++;
        }
      } while (!once && inWindow());
    }),
  );
  agent.destroy();
  const end = once ? performance.now() : Math.max(Math.min(performance.now(), deadline), lastCompletion);
  const elapsed = (end - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    concurrency,
    seconds: elapsed,
    completed: latencies.length,
    rps: latencies.length / elapsed,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    maxMs: latencies.at(-1) ?? 0,
    statuses,
    errors,
  };
}
