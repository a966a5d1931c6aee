// The workspace's lint of file names: every source, test and script file of every package is snake_case
// (`work_registry.ts`, `drain_agent.test.ts`), as the seed's conventions say. Exit 1 naming each offender.
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const SNAKE = /^[a-z0-9]+(_[a-z0-9]+)*(\.[a-z0-9]+)*\.(ts|mts|cts|mjs|cjs|js)$/;
const SKIP = new Set(["node_modules", "dist", "generated"]);

function* files(dir) {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name) || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* files(path);
    else if (/\.(ts|mts|cts|mjs|cjs|js)$/.test(name)) yield path;
  }
}

const bad = [];
for (const pkg of readdirSync(join(root, "packages"))) {
  for (const part of ["src", "test", "scripts"]) {
    const dir = join(root, "packages", pkg, part);
    try {
      statSync(dir);
    } catch {
      continue;
    }
    for (const path of files(dir)) {
      const name = path.split(/[\\/]/).pop() ?? "";
      if (!SNAKE.test(name)) bad.push(relative(root, path));
    }
  }
}
for (const path of files(join(root, "scripts"))) if (!SNAKE.test(path.split(/[\\/]/).pop() ?? "")) bad.push(relative(root, path));
if (bad.length > 0) {
  console.error(`file names must be snake_case (lower case words joined by '_'):\n  ${bad.join("\n  ")}`);
  process.exit(1);
}
