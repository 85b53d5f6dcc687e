/**
 * `node scripts/layers.ts`: writes the layer rules of biome.json from the table below, the one
 * statement of which part of packages/service/src may import which (docs/design.md draws it). Each
 * part, a folder or a top-level file, gets one `noRestrictedImports` override that refuses every
 * other part it may not import. `--check` writes nothing and exits 1 when biome.json is out of date;
 * packages/service/test/layers.test.ts does the same, and proves with Biome itself that every
 * forbidden import is refused and every permitted one accepted.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const biomeConfigPath = resolve(root, "biome.json");
export const src = "packages/service/src";

/** The files everyone stands on. */
const foundation = ["config.ts", "errors.ts", "logger.ts", "version.ts"];
/** What the services stand on. */
const bottom = ["credentials", "db", "i18n", "outbox", ...foundation];
/**
 * The services: accounts, and beside it what builds on it. Accounts reaches the outboxes in mail/
 * and webhooks/ only through the small interfaces it declares (events.ts, WelcomeMail, RecoveryMail).
 */
const services = ["accounts", "openpgp", "tokens", "metrics", "webhooks", "mail"];
const neighbours = ["accounts", ...bottom];
const belowWiring = ["admin", "import", "jobs", ...services, ...bottom];

/** Every part of src, from the top down, with the parts it may import (folders without the slash). */
export const layers: Record<string, string[]> = {
  "main.ts": [], // filled in below: everything
  "command-line.ts": foundation,
  cli: ["services.ts", ...belowWiring],
  http: ["services.ts", ...belowWiring],
  web: ["services.ts", ...belowWiring],
  "background.ts": ["services.ts", ...belowWiring],
  "services.ts": belowWiring,
  admin: ["jobs", ...services, ...bottom],
  // The bulk import creates users as the caller's actor, through the admin services (audit log).
  import: ["admin", ...services, ...bottom],
  jobs: [...services, ...bottom],
  openpgp: neighbours,
  tokens: neighbours,
  metrics: neighbours,
  webhooks: neighbours,
  mail: neighbours,
  accounts: bottom,
  outbox: ["db", "config.ts", "errors.ts", "logger.ts"],
  credentials: foundation,
  db: foundation,
  i18n: foundation,
  "logger.ts": ["config.ts", "errors.ts", "version.ts"],
  "config.ts": ["errors.ts", "version.ts"],
  "errors.ts": [],
  "version.ts": [],
};
layers["main.ts"] = Object.keys(layers).filter((part) => part !== "main.ts");

/** The outbox workers: only background.ts (and main.ts) start them, whoever may import their folder. */
export const workers = ["mail/sender.ts", "mail/worker.ts", "webhooks/worker.ts"];
const workerStarters = ["main.ts", "background.ts"];

const isFile = (part: string) => part.endsWith(".ts");
const shown = (part: string) => (isFile(part) ? part : `${part}/`);
/** How an import of the part looks, from anywhere (Biome matches the import's text, not the file). */
const pattern = (part: string) => (isFile(part) ? `**/${part}` : `**/${part}/**`);

interface Override {
  includes: string[];
  linter: { rules: { style: { noRestrictedImports: { level: "error"; options: { patterns: Pattern[] } } } } };
}
interface Pattern {
  group: string[];
  message: string;
}

const override = (includes: string, patterns: Pattern[]): Override => ({
  includes: [includes],
  linter: { rules: { style: { noRestrictedImports: { level: "error", options: { patterns } } } } },
});

/** The overrides biome.json should carry for the layers, in the table's order. */
export function layerOverrides(): Override[] {
  const overrides: Override[] = [];
  for (const [part, may] of Object.entries(layers)) {
    const group = Object.keys(layers)
      .filter((other) => other !== part && !may.includes(other))
      .map(pattern);
    if (group.length === 0) continue;
    // The console's own main.ts is not src/main.ts.
    if (part === "cli") group.push("!./main.ts");
    const patterns: Pattern[] = [
      {
        group,
        message: `${shown(part)} may import only ${may.length > 0 ? may.map(shown).join(", ") : "nothing of ours"} (the layers: docs/design.md).`,
      },
    ];
    const reachesWorkers = workers.some((worker) => may.includes(worker.split("/")[0]!));
    if (reachesWorkers && !workerStarters.includes(part))
      patterns.push({
        group: workers.map((worker) => `**/${worker}`),
        message: "The outbox workers sit above every service: only background.ts starts them.",
      });
    overrides.push(override(isFile(part) ? `${src}/${part}` : `${src}/${part}/**`, patterns));
    if (part === "http")
      overrides.push(
        override(`${src}/http/admin/**`, [
          ...patterns,
          {
            group: ["**/integration/**"],
            message:
              "The integration API's fast path stays inside its plugin: the admin API does not use it.",
          },
        ]),
      );
  }
  return overrides;
}

const isLayerOverride = (o: { includes?: string[] }) => o.includes?.some((i) => i.startsWith(`${src}/`));

/** biome.json's overrides for the layers, as written now. */
export function currentLayerOverrides(): unknown[] {
  const config = JSON.parse(readFileSync(biomeConfigPath, "utf8"));
  return config.overrides.filter(isLayerOverride);
}

if (import.meta.main) {
  const config = JSON.parse(readFileSync(biomeConfigPath, "utf8"));
  const wanted = layerOverrides();
  if (process.argv.includes("--check")) {
    const current = config.overrides.filter(isLayerOverride);
    if (JSON.stringify(current) !== JSON.stringify(wanted)) {
      console.error("biome.json's layer rules are out of date; run: node scripts/layers.ts");
      process.exit(1);
    }
  } else {
    config.overrides = [...config.overrides.filter((o: Override) => !isLayerOverride(o)), ...wanted];
    writeFileSync(biomeConfigPath, `${JSON.stringify(config, null, 2)}\n`);
    const format = spawnSync(
      resolve(root, "node_modules/.bin/biome"),
      ["format", "--write", biomeConfigPath],
      {
        stdio: "inherit",
      },
    );
    process.exit(format.status ?? 1);
  }
}
