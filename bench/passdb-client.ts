import { Agent, request } from "node:http";
import type { KeyedRequest } from "./dataset.ts";
import { measureWindow } from "./window.ts";

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
          ...(item.clientAddress ? { "x-client-address": item.clientAddress } : {}),
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
 * Closed-loop passdb sign-ins, `concurrency` at once, for `seconds` (see measureWindow). With
 * `seconds` 0, each loop sends exactly one request (the burst of the memory run).
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
  let next = 0;
  const window = await measureWindow(seconds, concurrency, () =>
    post(agent, url, token, list[next++ % list.length]!),
  );
  agent.destroy();
  const statuses: Record<string, number> = {};
  for (const { value } of window.answers) statuses[value] = (statuses[value] ?? 0) + 1;
  const latencies = window.answers.map((answer) => answer.ms).sort((x, y) => x - y);
  return {
    concurrency,
    seconds: window.seconds,
    completed: latencies.length,
    rps: latencies.length / window.seconds,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    maxMs: latencies.at(-1) ?? 0,
    statuses,
    errors: window.errors,
  };
}
