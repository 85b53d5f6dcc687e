/**
 * `node scripts/api-reference.ts`: writes the generated reference of docs/api.md, the part between
 * the two marker comments, from the OpenAPI document the service serves at `GET /api/openapi.json`
 * (built here from the routes, on an in-memory SQLite database). The hand-written text around the
 * markers stays as it is. `--check` writes nothing and exits 1 when docs/api.md is out of date;
 * test/api-reference.test.ts does the same in the test suite.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { FastifyInstance } from "fastify";
import { InstallationSecret } from "../packages/service/src/config.ts";
import { CryptoPool } from "../packages/service/src/credentials/crypto-pool.ts";
import { openDatabase } from "../packages/service/src/db/database.ts";
import { migrateToLatest } from "../packages/service/src/db/migrate.ts";
import { buildApp } from "../packages/service/src/http/app.ts";
import { messages } from "../packages/service/src/http/schemas.ts";
import { createLogger } from "../packages/service/src/logger.ts";
import { createServices } from "../packages/service/src/services.ts";

export const apiDocPath = resolve(dirname(new URL(import.meta.url).pathname), "../docs/api.md");
export const beginMarker =
  "<!-- BEGIN GENERATED REFERENCE: written by `node scripts/api-reference.ts` from the OpenAPI document; do not edit by hand -->";
export const endMarker = "<!-- END GENERATED REFERENCE -->";

// biome-ignore lint/suspicious/noExplicitAny: an OpenAPI document is arbitrary JSON
type Json = any;

/** The document as the service serves it, with every route (metrics included) registered. */
export async function currentOpenApiDocument(): Promise<Json> {
  const database = await openDatabase("sqlite::memory:");
  let app: FastifyInstance | undefined;
  try {
    await migrateToLatest(database);
    app = await buildApp({
      logger: createLogger("silent"),
      services: createServices(database, new CryptoPool(1), {
        installationSecret: InstallationSecret.generate(),
      }),
      metricsToken: "documented",
    });
    const answer = await app.inject({ method: "GET", url: "/api/openapi.json" });
    if (answer.statusCode !== 200) throw new Error(`GET /api/openapi.json answered ${answer.statusCode}`);
    return answer.json();
  } finally {
    await app?.close();
    await database.close();
  }
}

/** docs/api.md with its generated part replaced; the markers must be there, once each. */
export function withReference(markdown: string, reference: string): string {
  const begin = markdown.indexOf(beginMarker);
  const end = markdown.indexOf(endMarker);
  if (begin < 0 || end < begin || markdown.indexOf(beginMarker, begin + 1) >= 0) {
    throw new Error(
      `docs/api.md needs the markers ${beginMarker} and ${endMarker}, once each, in that order`,
    );
  }
  return `${markdown.slice(0, begin + beginMarker.length)}\n${reference}${markdown.slice(end)}`;
}

const methodOrder = ["get", "head", "post", "put", "patch", "delete", "options", "trace"];

/** The reference in Markdown: per tag, each operation with its token, input and every answer. */
export function renderReference(document: Json): string {
  const lines: string[] = [
    "## Reference",
    "",
    "Generated from the OpenAPI document (`GET /api/openapi.json`, no token). Each operation with the",
    "token scope it needs, its parameters and body, and every status it answers with an example body.",
    "The automatic 405 of a known path with another method is not listed per operation.",
    "",
    "### Common answers",
    "",
    "Answers many operations give with the same body, listed here once; each operation names those it gives.",
    "",
    "| Status | Meaning | Body |",
    "|---|---|---|",
    ...commonAnswers.map(({ status, meaning, bodies }) =>
      row([status, meaning, bodies.map((body) => code(JSON.stringify(body))).join("<br>")]),
    ),
    "",
  ];
  const operations = new Map<string, { method: string; path: string; operation: Json }[]>();
  for (const [path, item] of Object.entries<Json>(document.paths ?? {})) {
    for (const method of methodOrder) {
      const operation = item[method];
      if (!operation) continue;
      const tag = operation.tags?.[0] ?? "other";
      operations.set(tag, [...(operations.get(tag) ?? []), { method, path, operation }]);
    }
  }
  const tags: { name: string; description?: string }[] = [...(document.tags ?? [])];
  for (const name of operations.keys()) if (!tags.some((tag) => tag.name === name)) tags.push({ name });
  for (const tag of tags) {
    const list = operations.get(tag.name);
    if (!list) continue;
    lines.push(`### ${tag.name}`, "");
    if (tag.description) lines.push(tag.description, "");
    for (const { method, path, operation } of list)
      lines.push(...renderOperation(document, method, path, operation));
  }
  return `${lines.join("\n").trimEnd()}\n\n`;
}

function renderOperation(document: Json, method: string, path: string, operation: Json): string[] {
  const lines = [`#### ${method.toUpperCase()} \`${path}\``, ""];
  const summary: string = operation.summary ?? "";
  const text = [summary && !/[.!?]$/.test(summary) ? `${summary}.` : summary, operation.description ?? ""]
    .filter(Boolean)
    .join(" ");
  if (text) lines.push(text, "");
  lines.push(`Token: ${security(document, operation)}.`, "");
  const parameters: Json[] = operation.parameters ?? [];
  if (parameters.length > 0) {
    lines.push("| Parameter | In | Type | Required | Description |", "|---|---|---|---|---|");
    for (const parameter of parameters) {
      lines.push(
        row([
          code(parameter.name),
          parameter.in,
          typeOf(parameter.schema),
          parameter.required ? "yes" : "no",
          parameter.description ?? parameter.schema?.description ?? "",
        ]),
      );
    }
    lines.push("");
  }
  if (operation.requestBody?.content) {
    const content: Record<string, Json> = operation.requestBody.content;
    const types = Object.keys(content).map(code).join(", ");
    const schema = Object.values(content)[0]?.schema ?? {};
    lines.push(
      `Body (${types})${operation.requestBody.required ? "" : ", optional"}: ${typeOf(schema)}.`,
      "",
    );
    const properties: Record<string, Json> = schema.properties ?? {};
    if (Object.keys(properties).length > 0) {
      const required = new Set<string>(schema.required ?? []);
      lines.push("| Field | Type | Required | Description |", "|---|---|---|---|");
      for (const [name, property] of Object.entries(properties)) {
        lines.push(
          row([code(name), typeOf(property), required.has(name) ? "yes" : "no", property.description ?? ""]),
        );
      }
      lines.push("");
    }
  }
  const common: string[] = [];
  lines.push("| Status | Meaning | Content type | Example |", "|---|---|---|---|");
  for (const [status, response] of Object.entries<Json>(operation.responses ?? {})) {
    const content = Object.entries<Json>(response.content ?? {});
    if (isCommon(status, content)) {
      common.push(status);
      continue;
    }
    if (content.length === 0) lines.push(row([status, response.description ?? "", "", "(no body)"]));
    for (const [type, media] of content) {
      lines.push(row([status, response.description ?? "", code(type), examplesOf(media)]));
    }
  }
  if (common.length > 0) lines.push("", `Also the [common answers](#common-answers) ${common.join(", ")}.`);
  lines.push("");
  return lines;
}

/** The answers of the token guard, the body parser and the error handler, the same on every route. */
const commonAnswers: { status: string; meaning: string; bodies: Json[]; prefix?: boolean }[] = [
  {
    status: "400",
    meaning: "The body is not valid JSON or form data",
    bodies: [{ message: messages.invalidJson }, { message: messages.invalidForm }],
  },
  {
    status: "401",
    meaning: "No API token, or an unknown one",
    bodies: [
      { message: "No API token provided", error: "No API token provided" },
      { message: "Invalid API token", error: "Invalid API token" },
    ],
  },
  {
    status: "403",
    meaning: "The token lacks the operation's scope",
    bodies: [{ message: "Token does not have required scope: <scope>" }],
    prefix: true,
  },
  { status: "413", meaning: "The body is over the limit", bodies: [{ message: messages.bodyTooLarge }] },
  {
    status: "415",
    meaning: "A Content-Type the operation does not read",
    bodies: [{ message: messages.unsupportedFormat }],
  },
  { status: "500", meaning: "An unexpected failure (logged)", bodies: [{ message: messages.internal }] },
  {
    status: "503",
    meaning: "The database does not answer; try again",
    bodies: [{ message: messages.unavailable }],
  },
];

/** A response whose only body is one of the common answers (the 403 with the operation's own scope). */
function isCommon(status: string, content: [string, Json][]): boolean {
  const answer = commonAnswers.find((candidate) => candidate.status === status);
  if (!answer || content.length !== 1) return false;
  const [type, media] = content[0] as [string, Json];
  if (type !== "application/json") return false;
  const examples = examplesList(media).map((example) => JSON.stringify(example));
  const bodies = answer.bodies.map((body) => JSON.stringify(body));
  if (answer.prefix) {
    return (
      examples.length === 1 &&
      /^\{"message":"Token does not have required scope: [a-z-]+"\}$/.test(examples[0] ?? "")
    );
  }
  return examples.length === bodies.length && examples.every((example, index) => example === bodies[index]);
}

function security(document: Json, operation: Json): string {
  const requirements: Record<string, string[]>[] = operation.security ?? document.security ?? [];
  if (requirements.length === 0) return "none";
  return requirements
    .map((requirement) =>
      Object.entries(requirement)
        .map(([scheme, scopes]) =>
          scheme === "apiToken" ? `API token with scope ${scopes.map(code).join(", ")}` : `\`${scheme}\``,
        )
        .join(" and "),
    )
    .join(" or ");
}

/** The examples of a response, each as inline code; long ones are cut (the document has them whole). */
function examplesOf(media: Json): string {
  const examples = examplesList(media);
  if (examples.length === 0) return "";
  return examples
    .map((example) => {
      const text = typeof example === "string" ? example : JSON.stringify(example);
      if (text === "") return "(empty)";
      return code(text.length > 200 ? `${text.slice(0, 200)}…` : text);
    })
    .join("<br>");
}

function examplesList(media: Json): Json[] {
  const examples: Json[] = [];
  if (media.example !== undefined) examples.push(media.example);
  for (const example of Object.values<Json>(media.examples ?? {})) examples.push(example.value);
  if (Array.isArray(media.schema?.examples)) examples.push(...media.schema.examples);
  return examples;
}

/** A short type: `string`, `integer`, `array of string`, `"a" \| "b"`, `object`, `string or null`. */
function typeOf(schema: Json): string {
  if (!schema || typeof schema !== "object") return "any";
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (Array.isArray(schema.enum)) return schema.enum.map((value: Json) => JSON.stringify(value)).join(" | ");
  const union = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(union)) return [...new Set(union.map(typeOf))].join(" or ");
  const types: string[] = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  if (types.length === 0) return (schema.$ref ? String(schema.$ref).split("/").pop() : undefined) ?? "any";
  return types
    .map((type) => {
      if (type === "array") return `array of ${typeOf(schema.items)}`;
      if (type === "string" && schema.format) return `string (${schema.format})`;
      return type;
    })
    .join(" or ");
}

function code(text: string): string {
  const fence = text.includes("`") ? "``" : "`";
  const padding = text.startsWith("`") || text.endsWith("`") ? " " : "";
  return `${fence}${padding}${text}${padding}${fence}`;
}

/** A table row: `|` escaped (also inside code), line breaks flattened. */
function row(cells: string[]): string {
  return `| ${cells.map((cell) => String(cell).replace(/\|/g, "\\|").replace(/\r?\n/g, " ")).join(" | ")} |`;
}

if (import.meta.main) {
  const check = process.argv.includes("--check");
  const current = readFileSync(apiDocPath, "utf8");
  const updated = withReference(current, renderReference(await currentOpenApiDocument()));
  if (check) {
    if (updated !== current) {
      console.error("docs/api.md is out of date: run node scripts/api-reference.ts");
      process.exit(1);
    }
  } else if (updated !== current) {
    writeFileSync(apiDocPath, updated);
    console.log("docs/api.md: reference updated");
  } else {
    console.log("docs/api.md: reference already up to date");
  }
}
