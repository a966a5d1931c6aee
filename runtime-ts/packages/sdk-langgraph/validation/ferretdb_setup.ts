// Starts FerretDB (the MongoDB wire protocol over SQLite, built by tests/integration/build_ferretdb.sh, the
// binary the Python tests use) on a free loopback port for the MongoDB run, and stops it after the suite.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, mkdirSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    mongodbUri: string;
  }
}

const REPO_ROOT = resolve(import.meta.dirname, "..", "..", "..", "..");

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => done(port));
    });
  });
}

async function waitForPort(port: number, child: ChildProcess, seconds: number): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`FerretDB exited with ${child.exitCode} before listening`);
    const open = await new Promise<boolean>((done) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => (socket.destroy(), done(true)));
      socket.once("error", () => done(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`FerretDB did not listen on 127.0.0.1:${port} within ${seconds} s`);
}

export default async function setup(project: TestProject): Promise<() => void> {
  const built = spawnSync("bash", [join(REPO_ROOT, "tests", "integration", "build_ferretdb.sh")], { encoding: "utf8" });
  if (built.status !== 0) {
    throw new Error(`build_ferretdb.sh failed (exit ${built.status}): ${built.stderr.slice(-2000)}`);
  }
  const binary = built.stdout.trim().split("\n").at(-1) ?? "";
  const dir = mkdtempSync(join(tmpdir(), "ferretdb-ts-"));
  mkdirSync(join(dir, "data"));
  const port = await freePort();
  // FERRETDB_* variables from the caller's environment would override the flags.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("FERRETDB_")));
  const child = spawn(
    binary,
    [
      "--handler=sqlite",
      `--sqlite-url=file:${dir}/data/`,
      `--listen-addr=127.0.0.1:${port}`,
      `--state-dir=${dir}`,
      "--debug-addr=-",
      "--telemetry=disable",
      "--log-level=WARN",
      "--log-format=text",
    ],
    { cwd: dir, env: { ...env, DO_NOT_TRACK: "1" }, stdio: "ignore" },
  );
  await waitForPort(port, child, 30);
  project.provide("mongodbUri", `mongodb://127.0.0.1:${port}/`);
  return () => {
    child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  };
}
