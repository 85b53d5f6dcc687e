import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";

// A small worker-thread pool for the legacy crypt formats: SHA-crypt with high rounds or bcrypt can
// take hundreds of milliseconds of pure CPU, which must not block the event loop. Concurrency is
// already bounded by the CryptoPool the callers go through; MAX_WORKERS is only a backstop.
// Idle workers are unref'd (they never keep the process alive) and exit after IDLE_MS.

const MAX_WORKERS = availableParallelism();
const IDLE_MS = 30_000;
const WORKER_URL = new URL("./legacy-crypt-worker.ts", import.meta.url);

interface Job {
  password: string;
  setting: string;
  resolve: (result: string | null) => void;
  reject: (error: Error) => void;
}

interface Slot {
  worker: Worker;
  job: Job | null;
  idleTimer: NodeJS.Timeout | null;
  gone: boolean;
}

const pending: Job[] = [];
const idle: Slot[] = [];
let workers = 0;

/** crypt(password, setting) computed in a worker thread; null for unsupported or malformed settings. */
export function legacyCrypt(password: string, setting: string): Promise<string | null> {
  return new Promise((resolve, reject) => {
    pending.push({ password, setting, resolve, reject });
    dispatch();
  });
}

function dispatch(): void {
  while (pending.length > 0) {
    const slot = idle.pop() ?? (workers < MAX_WORKERS ? spawn() : null);
    if (!slot) return;
    const job = pending.shift()!;
    if (slot.idleTimer) clearTimeout(slot.idleTimer);
    slot.idleTimer = null;
    slot.job = job;
    slot.worker.ref();
    slot.worker.postMessage({ password: job.password, setting: job.setting });
  }
}

function spawn(): Slot {
  const worker = new Worker(WORKER_URL);
  const slot: Slot = { worker, job: null, idleTimer: null, gone: false };
  workers++;
  worker.on("message", (message: { result?: string | null; error?: string }) => {
    const job = slot.job;
    slot.job = null;
    if (job) {
      if (message.error !== undefined) job.reject(new Error(message.error));
      else job.resolve(message.result ?? null);
    }
    worker.unref();
    idle.push(slot);
    slot.idleTimer = setTimeout(() => retire(slot), IDLE_MS);
    slot.idleTimer.unref();
    dispatch();
  });
  const fail = (error: Error) => {
    if (slot.job) slot.job.reject(error);
    slot.job = null;
    retire(slot);
  };
  worker.on("error", fail);
  worker.on("exit", (code) => fail(new Error(`legacy crypt worker exited with code ${code}`)));
  return slot;
}

function retire(slot: Slot): void {
  if (slot.gone) return;
  slot.gone = true;
  workers--;
  if (slot.idleTimer) clearTimeout(slot.idleTimer);
  const index = idle.indexOf(slot);
  if (index !== -1) idle.splice(index, 1);
  void slot.worker.terminate();
  dispatch();
}
