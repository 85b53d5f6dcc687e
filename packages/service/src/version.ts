import { readFileSync } from "node:fs";

/**
 * The service's version: the one of packages/service/package.json, read once when first imported,
 * so `--version`, the start-up log line and the build-info metric can never disagree.
 */
export const serviceVersion: string = (
  JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }
).version;

/** The Node.js version running the service (the pinned one, unless started otherwise). */
export const nodeVersion: string = process.versions.node;
