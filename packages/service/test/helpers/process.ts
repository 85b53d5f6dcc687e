import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

export const repoRoot = fileURLToPath(new URL("../../../../", import.meta.url));
export const consolePath = `${repoRoot}bin/console`;

/**
 * The installation secret of the tests (INSTALLATION_SECRET): the console, services started as a
 * process and in-process services (helpers/service.ts) all share it, as one installation's do.
 * A test that wants the file instead passes `INSTALLATION_SECRET: ""` (empty counts as unset).
 */
export const testInstallationSecret = "5e".repeat(32);

export interface CommandResult {
  status: number;
  stdout: string;
  stderr: string;
}

/** Runs bin/console as an operator would, against the given database. */
export function runConsole(
  databaseUrl: string,
  args: string[],
  input?: string,
  env: Record<string, string> = {},
): CommandResult {
  const result = spawnSync(consolePath, args, {
    env: {
      ...process.env,
      INSTALLATION_SECRET: testInstallationSecret,
      DATABASE_URL: databaseUrl,
      LOG_LEVEL: "silent",
      ...env,
    },
    input: input ?? "",
    encoding: "utf8",
    timeout: 60000,
  });
  return { status: result.status ?? -1, stdout: result.stdout, stderr: result.stderr };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}

export interface RunningService {
  child: ChildProcess;
  url: string;
  output: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts the service the way `npm start` does, and waits until it answers. */
export async function startServiceProcess(env: Record<string, string>): Promise<RunningService> {
  const port = await freePort();
  const child = spawn(`${repoRoot}node_modules/.bin/node`, [`${repoRoot}packages/service/src/main.ts`], {
    env: {
      ...process.env,
      INSTALLATION_SECRET: testInstallationSecret,
      LISTEN_ADDR: `127.0.0.1:${port}`,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`service exited early: ${output}`);
    try {
      await fetch(`${url}/.well-known/openpgpkey/x.org/policy`);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`service did not start: ${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    child,
    url,
    output: () => output,
    stop: (signal = "SIGTERM") =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve(child.exitCode);
        child.once("exit", (code) => resolve(code));
        child.kill(signal);
      }),
  };
}
