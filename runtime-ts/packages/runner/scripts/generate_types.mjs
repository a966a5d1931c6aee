// The TypeScript types of the wire contracts, generated from schema/protocol.schema.json (itself emitted
// from agent_runtime/protocol.py). `node scripts/generate_types.mjs` writes src/generated/protocol_types.ts;
// `--check` exits 1 when the checked-in file differs. test/generated_types.test.ts runs the same check.
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { compile } from "json-schema-to-typescript";

const here = dirname(fileURLToPath(import.meta.url));
export const SCHEMA_PATH = join(here, "..", "schema", "protocol.schema.json");
export const TYPES_PATH = join(here, "..", "src", "generated", "protocol_types.ts");

export async function renderTypes() {
  const document = JSON.parse(await readFile(SCHEMA_PATH, "utf8"));
  // pydantic titles every field; without this each field would be a type alias of its own.
  for (const model of Object.values(document.$defs)) {
    for (const field of Object.values(model.properties ?? {})) {
      delete field.title;
      // pydantic's `Any` is the empty schema: any JSON value, `unknown` (not an object) in TypeScript.
      const shape = ["type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "items", "properties"];
      if (!shape.some((key) => key in field)) field.tsType = "unknown";
    }
  }
  const root = {
    title: "ProtocolDocument",
    type: "object",
    additionalProperties: false,
    properties: Object.fromEntries(Object.keys(document.$defs).map((name) => [name, { $ref: `#/$defs/${name}` }])),
    $defs: document.$defs,
  };
  const body = await compile(root, "ProtocolDocument", {
    bannerComment:
      "// Generated from schema/protocol.schema.json (agent_runtime/protocol.py) by scripts/generate_types.mjs.\n" +
      "// Do not edit by hand: run `python -m agent_runtime.protocol_schema` then `npm run generate`.",
    additionalProperties: false,
    strictIndexSignatures: true,
    unreachableDefinitions: true,
    format: true,
    style: { semi: true, singleQuote: false, printWidth: 110 },
  });
  const constants = `\nexport const PROTOCOL_CONSTANTS = ${JSON.stringify(document["x-constants"], null, 2)} as const;\n`;
  return body + constants;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = await renderTypes();
  if (process.argv.includes("--check")) {
    const current = await readFile(TYPES_PATH, "utf8").catch(() => "");
    if (current !== text) {
      console.error(`${TYPES_PATH} is out of date with ${SCHEMA_PATH}; run npm run generate in runtime-ts`);
      process.exit(1);
    }
  } else {
    await writeFile(TYPES_PATH, text);
  }
}
