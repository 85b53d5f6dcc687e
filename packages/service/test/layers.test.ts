import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  biomeConfigPath,
  currentLayerOverrides,
  layerOverrides,
  layers,
  root,
  src,
  workers,
} from "../../../scripts/layers.ts";

/**
 * The layers as Biome enforces them: for every part of src (folder or top-level file), a probe file
 * in that part's place imports every other part, one import a line, and each line is expected
 * refused exactly when scripts/layers.ts's table does not let the part import it. The probes live
 * in a scratch copy of the tree next to a copy of biome.json (Biome does not report diagnostics
 * for --stdin-file-path), so nothing is written into src, and one Biome run checks them all.
 */

const parts = Object.keys(layers);
const isFile = (part: string) => part.endsWith(".ts");

interface Probe {
  /** The probe file, relative to the repository. */
  path: string;
  lines: { text: string; refused: boolean; what: string }[];
}

/** A probe in the part's own place: the top-level file itself, or a file in the folder, or two folders deeper. */
function probeOf(part: string, nested = false): Probe {
  const up = isFile(part) ? "./" : nested ? "../../../" : "../";
  const path = isFile(part)
    ? `${src}/${part}`
    : `${src}/${part}/${nested ? "layers-probe/nested/probe.ts" : "layers-probe.ts"}`;
  const lines: Probe["lines"] = [];
  for (const other of parts.filter((p) => p !== part)) {
    const target = isFile(other) ? other : `${other}/probe-target.ts`;
    lines.push({ text: `import "${up}${target}";`, refused: !layers[part]!.includes(other), what: other });
  }
  for (const worker of workers) {
    const folder = worker.split("/")[0]!;
    if (folder === part) continue;
    const refused = !["main.ts", "background.ts"].includes(part);
    lines.push({ text: `import "${up}${worker}";`, refused, what: worker });
  }
  return { path, lines };
}

const probes: Probe[] = parts.flatMap((part) =>
  isFile(part) ? [probeOf(part)] : [probeOf(part), probeOf(part, true)],
);
// Every kind of import is checked, not only the plain one.
probes.push({
  path: `${src}/accounts/layers-probe-kinds.ts`,
  lines: [
    { text: `import type { App } from "../http/app.ts";`, refused: true, what: "import type" },
    { text: `export { page } from "../web/render.ts";`, refused: true, what: "export from" },
    { text: `export const later = () => import("../cli/main.ts");`, refused: true, what: "import()" },
    { text: `import { x } from "../db/schema.ts";`, refused: false, what: "db, named" },
  ],
});
// The admin API stays out of the integration API's fast path; the rest of http/ may use it.
probes.push(
  {
    path: `${src}/http/admin/layers-probe.ts`,
    lines: [
      { text: `import "../integration/plugin.ts";`, refused: true, what: "http/integration" },
      { text: `import "../../accounts/users.ts";`, refused: false, what: "accounts" },
      { text: `import "../../web/plugin.ts";`, refused: true, what: "web" },
    ],
  },
  {
    path: `${src}/http/layers-probe-integration.ts`,
    lines: [{ text: `import "./integration/plugin.ts";`, refused: false, what: "http/integration" }],
  },
  // The console's own main.ts is not src/main.ts.
  {
    path: `${src}/cli/layers-probe-main.ts`,
    lines: [
      { text: `import "./main.ts";`, refused: false, what: "cli/main.ts" },
      { text: `import "../main.ts";`, refused: true, what: "main.ts" },
    ],
  },
);

/** Refused lines (1-based) per probe file, from one Biome run over the scratch tree. */
const refusedLines = new Map<string, Set<number>>();
let scratch = "";
let seconds = 0;

before(() => {
  scratch = mkdtempSync(join(tmpdir(), "layers-"));
  copyFileSync(biomeConfigPath, join(scratch, "biome.json"));
  for (const probe of probes) {
    mkdirSync(dirname(join(scratch, probe.path)), { recursive: true });
    writeFileSync(join(scratch, probe.path), `${probe.lines.map((line) => line.text).join("\n")}\n`);
  }
  const started = performance.now();
  const run = spawnSync(
    join(root, "node_modules/.bin/biome"),
    [
      "lint",
      "--vcs-enabled=false",
      "--only=style/noRestrictedImports",
      "--reporter=json",
      "--max-diagnostics=none",
      "packages",
    ],
    { cwd: scratch, encoding: "utf8" },
  );
  seconds = (performance.now() - started) / 1000;
  const report = JSON.parse(run.stdout) as {
    diagnostics: { category: string; location: { path: string; start: { line: number } } }[];
  };
  for (const diagnostic of report.diagnostics) {
    assert.equal(diagnostic.category, "lint/style/noRestrictedImports", JSON.stringify(diagnostic));
    const lines = refusedLines.get(diagnostic.location.path) ?? new Set();
    lines.add(diagnostic.location.start.line);
    refusedLines.set(diagnostic.location.path, lines);
  }
});

after(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("the layers of src, as the lint enforces them", () => {
  test("every folder and top-level file of src is a part of the table", () => {
    const entries = readdirSync(join(root, src)).filter((entry) => !entry.startsWith("."));
    assert.deepEqual(
      entries.filter((entry) => !parts.includes(entry)),
      [],
      "add the new part to scripts/layers.ts, then run it",
    );
  });

  test("biome.json carries the rules scripts/layers.ts writes from the table", () => {
    assert.deepEqual(currentLayerOverrides(), layerOverrides(), "run: node scripts/layers.ts");
  });

  test("one Biome run checks every probe quickly", () => {
    assert.ok(seconds < 20, `Biome took ${seconds.toFixed(1)} s`);
  });

  for (const probe of probes) {
    const refusedCount = probe.lines.filter((line) => line.refused).length;
    test(`${probe.path.slice(src.length + 1)}: ${refusedCount} imports refused, ${probe.lines.length - refusedCount} accepted`, () => {
      const refused = refusedLines.get(probe.path) ?? new Set();
      const wrong = probe.lines.flatMap((line, index) =>
        refused.has(index + 1) === line.refused
          ? []
          : [`${line.what} (${line.text}) ${line.refused ? "accepted" : "refused"}`],
      );
      assert.deepEqual(wrong, []);
    });
  }
});
