import { spawn, spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { KeyedRequest } from "./dataset.ts";

/** One load run against one server: what the load generator saw. */
export interface LoadResult {
  connections: number;
  seconds: number;
  requests: number;
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Answers other than 2xx/3xx: expected for unknown and deleted keys (404). */
  non2xx: number;
  /** Connection errors and timeouts: must be 0. */
  errors: number;
}

export interface LoadSpec {
  url: string;
  requests: KeyedRequest[];
  method: "GET" | "POST";
  token?: string;
  /** A Cookie header (the web pages' session). */
  cookie?: string;
  connections: number;
  seconds: number;
  /** Paced load: each connection waits this long after an answer before its next request. */
  delayMs?: number;
  timeoutSeconds?: number;
  /** Where the request list and script are written. */
  workDir: string;
  name: string;
}

export type LoadGenerator = "wrk" | "autocannon";

/** wrk when installed (C, cheap on a shared 2-core machine), otherwise autocannon in its own process. */
export function detectLoadGenerator(preferred?: string): { name: LoadGenerator; version: string } {
  if (preferred !== "autocannon") {
    const wrk = spawnSync("wrk", ["--version"], { encoding: "utf8" });
    if (!wrk.error) {
      const version = /wrk\s+(\S+)/.exec(`${wrk.stdout}${wrk.stderr}`)?.[1] ?? "unknown";
      return { name: "wrk", version: `wrk ${version}` };
    }
  }
  return { name: "autocannon", version: "autocannon 8" };
}

export function runLoad(generator: LoadGenerator, spec: LoadSpec): Promise<LoadResult> {
  return generator === "wrk" ? runWrk(spec) : runAutocannon(spec);
}

const luaString = (value: string) => `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;

/**
 * A wrk script that walks the (already shuffled) request list, each thread from its own offset,
 * with requests formatted once in init; done() prints the figures as one JSON line.
 */
function wrkScript(spec: LoadSpec, listFile: string): string {
  const headers = [
    ...(spec.token ? [`["Authorization"] = ${luaString(`Bearer ${spec.token}`)}`] : []),
    ...(spec.cookie ? [`["Cookie"] = ${luaString(spec.cookie)}`] : []),
    ...(spec.method === "POST" ? [`["Content-Type"] = "application/json"`] : []),
  ].join(", ");
  return `
local requests = {}
local index = 0
local counter = 0
setup = function(thread)
  thread:set("offset", counter * 7919)
  counter = counter + 1
end
init = function(args)
  local headers = { ${headers} }
  for line in io.lines(${luaString(listFile)}) do
    -- path, then optionally the body and the client's address, separated by tabs
    local fields = {}
    for field in (line .. "\\t"):gmatch("([^\\t]*)\\t") do fields[#fields + 1] = field end
    local own = headers
    if fields[3] and fields[3] ~= "" then
      own = { ["X-Client-Address"] = fields[3] }
      for name, value in pairs(headers) do own[name] = value end
    end
    local body = fields[2]
    if body == "" then body = nil end
    requests[#requests + 1] = wrk.format(${luaString(spec.method)}, fields[1], own, body)
  end
  index = (offset or 0) % #requests
end
request = function()
  index = index % #requests + 1
  return requests[index]
end
${spec.delayMs ? `delay = function() return ${Math.round(spec.delayMs)} end` : ""}
done = function(summary, latency, _)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
`;
}

function writeList(spec: LoadSpec): string {
  const file = join(spec.workDir, `${spec.name}.list`);
  // path, then optionally the body and the client's address (X-Client-Address), tab-separated
  const line = (r: KeyedRequest) =>
    r.clientAddress
      ? `${r.path}\t${r.body ?? ""}\t${r.clientAddress}`
      : r.body
        ? `${r.path}\t${r.body}`
        : r.path;
  writeFileSync(file, `${spec.requests.map(line).join("\n")}\n`);
  return file;
}

function runWrk(spec: LoadSpec): Promise<LoadResult> {
  const listFile = writeList(spec);
  const scriptFile = join(spec.workDir, `${spec.name}.lua`);
  writeFileSync(scriptFile, wrkScript(spec, listFile));
  // One wrk thread: it drives 64 connections easily and leaves the most CPU to the server.
  const args = [
    "-t1",
    `-c${spec.connections}`,
    `-d${spec.seconds}s`,
    `--timeout=${spec.timeoutSeconds ?? 10}s`,
    "-s",
    scriptFile,
    spec.url,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn("wrk", args, { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      const line = /WRK_JSON (\{.*\})/.exec(output)?.[1];
      if (code !== 0 || !line) return reject(new Error(`wrk failed (${code}): ${output}`));
      const r = JSON.parse(line) as Record<string, number>;
      const seconds = (r.duration_us ?? 0) / 1e6;
      const requests = r.requests ?? 0;
      resolve({
        connections: spec.connections,
        seconds,
        requests,
        rps: requests / seconds,
        p50Ms: (r.p50_us ?? 0) / 1000,
        p90Ms: (r.p90_us ?? 0) / 1000,
        p99Ms: (r.p99_us ?? 0) / 1000,
        maxMs: (r.max_us ?? 0) / 1000,
        non2xx: r.status ?? 0,
        errors: (r.connect ?? 0) + (r.read ?? 0) + (r.write ?? 0) + (r.timeout ?? 0),
      });
    });
  });
}

const autocannonWorker = fileURLToPath(new URL("./autocannon-worker.ts", import.meta.url));

/** autocannon runs in a child process, so it never shares an event loop with anything else. */
function runAutocannon(spec: LoadSpec): Promise<LoadResult> {
  const listFile = writeList(spec);
  const job = {
    url: spec.url,
    listFile,
    method: spec.method,
    token: spec.token,
    cookie: spec.cookie,
    connections: spec.connections,
    seconds: spec.seconds,
    delayMs: spec.delayMs ?? 0,
    timeoutSeconds: spec.timeoutSeconds ?? 10,
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [autocannonWorker, JSON.stringify(job)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      const line = /AUTOCANNON_JSON (\{.*\})/.exec(output)?.[1];
      if (code !== 0 || !line) return reject(new Error(`autocannon failed (${code}): ${output}`));
      resolve({ connections: spec.connections, ...(JSON.parse(line) as Omit<LoadResult, "connections">) });
    });
  });
}
