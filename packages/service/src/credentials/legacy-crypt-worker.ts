import { parentPort } from "node:worker_threads";
import { cryptSync } from "./crypt.ts";

// Runs legacy crypt computations off the main thread, one request at a time.
parentPort!.on("message", (message: { password: string; setting: string }) => {
  try {
    parentPort!.postMessage({ result: cryptSync(message.password, message.setting) });
  } catch (error) {
    parentPort!.postMessage({ error: error instanceof Error ? error.message : String(error) });
  }
});
