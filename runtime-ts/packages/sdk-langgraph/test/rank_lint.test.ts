// The rank table is enforced: the lint passes on the package and fails on an upward import.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, appendFileSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";

const PACKAGE = resolve(import.meta.dirname, "..", "..");
const DEPCRUISE = resolve(PACKAGE, "..", "..", "node_modules", ".bin", "depcruise");

function cruise(dir: string): { status: number | null; output: string } {
  const done = spawnSync(DEPCRUISE, ["--config", ".dependency-cruiser.cjs", "src"], { cwd: dir, encoding: "utf8" });
  return { status: done.status, output: `${done.stdout}${done.stderr}` };
}

function copy(): string {
  const dir = mkdtempSync(join(tmpdir(), "sdk-rank-"));
  cpSync(join(PACKAGE, "src"), join(dir, "src"), { recursive: true });
  cpSync(join(PACKAGE, ".dependency-cruiser.cjs"), join(dir, ".dependency-cruiser.cjs"));
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: { module: "NodeNext", moduleResolution: "NodeNext" } }));
  return dir;
}

describe("the rank table", () => {
  it("holds for the package as it is", () => {
    const dir = copy();
    try {
      const done = cruise(dir);
      assert.equal(done.status, 0, done.output);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a file importing one of a higher rank", () => {
    const dir = copy();
    try {
      appendFileSync(join(dir, "src", "messages.ts"), '\nimport "./runtime.js";\n');
      const done = cruise(dir);
      assert.notEqual(done.status, 0);
      assert.match(done.output, /rank-11-imports-upward: src\/messages\.ts → src\/runtime\.ts/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses a file the table does not rank", () => {
    const dir = copy();
    try {
      writeFileSync(join(dir, "src", "helpers.ts"), "export const x = 1;\n");
      appendFileSync(join(dir, "src", "agent.ts"), '\nimport "./helpers.js";\n');
      const done = cruise(dir);
      assert.notEqual(done.status, 0);
      assert.match(done.output, /unranked-file: src\/agent\.ts → src\/helpers\.ts/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
