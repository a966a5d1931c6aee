// Builds examples/langgraphjs-agent against this workspace: the example is not a workspace package (it
// stands for a tenant's own repository), so its node_modules is a link to the workspace's, made here, and
// tsc -b compiles it with the SDK as a project reference. The TS integration tier runs what this builds.
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, symlinkSync } from "node:fs";
import { relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const workspace = fileURLToPath(new URL("../../..", import.meta.url));
const example = resolve(workspace, "..", "examples", "langgraphjs-agent");
if (!existsSync(resolve(example, "tsconfig.json"))) {
  console.error(`build_example: ${example}/tsconfig.json is missing`);
  process.exit(1);
}
const link = resolve(example, "node_modules");
let linked = false;
try {
  linked = lstatSync(link).isSymbolicLink() || lstatSync(link).isDirectory();
} catch {
  linked = false;
}
// Relative, so the link holds wherever the tree is (a clone elsewhere, an image's copy of both).
if (!linked) symlinkSync(relative(example, resolve(workspace, "node_modules")), link, "dir");
const tsc = resolve(workspace, "node_modules", ".bin", "tsc");
const done = spawnSync(tsc, ["-b", resolve(example, "tsconfig.json")], { stdio: "inherit" });
process.exit(done.status ?? 1);
