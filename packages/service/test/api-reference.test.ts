import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import {
  apiDocPath,
  beginMarker,
  currentOpenApiDocument,
  endMarker,
  renderReference,
  withReference,
} from "../../../scripts/api-reference.ts";

test("docs/api.md carries the reference generated from the current OpenAPI document", async () => {
  const current = readFileSync(apiDocPath, "utf8");
  const expected = withReference(current, renderReference(await currentOpenApiDocument()));
  // One line per difference is easier to act on than the whole file.
  const [have, want] = [current.split("\n"), expected.split("\n")];
  const first = want.findIndex((line, index) => line !== have[index]);
  assert.ok(
    current === expected,
    `docs/api.md is out of date (first difference at line ${first + 1}: ${JSON.stringify(have[first])} should be ${JSON.stringify(want[first])}); run: node scripts/api-reference.ts`,
  );
});

test("regenerating keeps the hand-written text around the markers and refuses a page without them", () => {
  const page = `# Title\n\nbefore\n\n${beginMarker}\nold reference\n${endMarker}\n\nafter\n`;
  assert.equal(
    withReference(page, "new reference\n"),
    `# Title\n\nbefore\n\n${beginMarker}\nnew reference\n${endMarker}\n\nafter\n`,
  );
  assert.throws(() => withReference("# Title\n", "x"), /needs the markers/);
  assert.throws(() => withReference(`${endMarker}\n${beginMarker}\n`, "x"), /needs the markers/);
});

test("the reference names each operation, its scope and every documented status", () => {
  const reference = renderReference({
    openapi: "3.1.0",
    tags: [{ name: "mta", description: "Postfix lookups. Scope `mta`." }],
    paths: {
      "/api/mta/alias/{email}": {
        get: {
          tags: ["mta"],
          summary: "Alias destinations",
          security: [{ apiToken: ["mta"] }],
          parameters: [{ name: "email", in: "path", required: true, schema: { type: "string" } }],
          responses: {
            200: {
              description: "Destinations",
              content: {
                "application/json": {
                  schema: { type: "array", items: { type: "string" } },
                  example: ["a|b@example.org"],
                },
              },
            },
            400: {
              description: "Bad request",
              content: { "application/json": { schema: {}, example: { message: "invalid e-mail address" } } },
            },
          },
        },
      },
    },
  });
  assert.match(reference, /^### mta$/m);
  assert.match(reference, /^#### GET `\/api\/mta\/alias\/\{email\}`$/m);
  assert.match(reference, /^Token: API token with scope `mta`\.$/m);
  assert.match(reference, /^\| `email` \| path \| string \| yes \|/m);
  assert.match(
    reference,
    /^\| 200 \| Destinations \| `application\/json` \| `\["a\\\|b@example\.org"\]` \|$/m,
  );
  assert.match(
    reference,
    /^\| 400 \| Bad request \| `application\/json` \| `\{"message":"invalid e-mail address"\}` \|$/m,
  );
});
