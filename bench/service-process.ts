import { type ChildProcess, spawn } from "node:child_process";
import { openSync } from "node:fs";
import { fileURLToPath } from "node:url";

const repoRoot = fileURLToPath(new URL("../", import.meta.url));

/**
 * The service as production runs it: from source, its default configuration, NODE_ENV=production,
 * on `127.0.0.1:port`, its output appended to `logFile`. `env` adds variables (a metrics token, jobs
 * off); `nodeArgs` go to Node (a CPU profile). Waiting until it answers is the caller's.
 */
export function spawnService(options: {
  databaseUrl: string;
  port: number;
  logFile: string;
  env?: Record<string, string>;
  nodeArgs?: string[];
}): ChildProcess {
  const { databaseUrl, port, logFile } = options;
  return spawn(process.execPath, [...(options.nodeArgs ?? []), `${repoRoot}packages/service/src/main.ts`], {
    cwd: repoRoot,
    env: {
      PATH: process.env.PATH ?? "",
      NODE_ENV: "production",
      DATABASE_URL: databaseUrl,
      LISTEN_ADDR: `127.0.0.1:${port}`,
      ...options.env,
    },
    stdio: ["ignore", openSync(logFile, "a"), openSync(logFile, "a")],
  });
}
