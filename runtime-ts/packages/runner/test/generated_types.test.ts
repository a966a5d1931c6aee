// The generated wire types are exactly what schema/protocol.schema.json gives (the Python side's unit test
// checks the schema against protocol.py): a schema change without `npm run generate` fails here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

const script = fileURLToPath(new URL("../../scripts/generate_types.mjs", import.meta.url));

test("the checked-in protocol types are the ones the schema generates", async () => {
  const { renderTypes, TYPES_PATH } = (await import(script)) as { renderTypes: () => Promise<string>; TYPES_PATH: string };
  const current = await readFile(TYPES_PATH, "utf8");
  assert.equal(current, await renderTypes(), "src/generated/protocol_types.ts is stale: run npm run generate in runtime-ts/packages/runner");
});
