// The launcher as a real process: logging is installed before the entrypoint is imported (an import
// failure is one ERROR record, JSON under STRUCTURED_LOGGING=true), bad settings exit 2 naming the fix, and
// the listener's host is logged exactly as the Python launcher logs it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chooseListenHost } from "../src/listen.js";

const launcher = fileURLToPath(new URL("../src/launcher.js", import.meta.url));
const drainAgent = fileURLToPath(new URL("./tenants/drain_agent.js", import.meta.url));
const brokenAgent = fileURLToPath(new URL("./tenants/broken_agent.js", import.meta.url));

function freePort(): Promise<string> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(String(typeof address === "object" && address !== null ? address.port : 0)));
    });
  });
}

interface Ran {
  code: number | null;
  lines: string[];
}

function launch(env: Record<string, string>, options: { until?: RegExp } = {}): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [launcher], { env: { PATH: process.env["PATH"] ?? "", ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    let signalled = false;
    const collect = (chunk: Buffer): void => {
      output += chunk.toString("utf8");
      if (!signalled && options.until?.test(output)) {
        signalled = true;
        child.kill("SIGTERM");
      }
    };
    child.stdout.on("data", collect);
    child.stderr.on("data", collect);
    child.on("close", (code) => resolve({ code, lines: output.split("\n").filter(Boolean) }));
  });
}

test("started through a symlinked directory (as the image does), the launcher still runs", async () => {
  const dir = mkdtempSync(join(tmpdir(), "launcher-link-"));
  const link = join(dir, "runner");
  symlinkSync(dirname(launcher), link);
  const ran = await new Promise<Ran>((resolve) => {
    const child = spawn(process.execPath, [join(link, "launcher.js")], { env: { PATH: process.env["PATH"] ?? "" }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
    child.on("close", (code) => resolve({ code, lines: output.split("\n").filter(Boolean) }));
  });
  rmSync(dir, { recursive: true, force: true });
  assert.equal(ran.code, 2, "main() ran and refused the missing RUNNER_MODE");
  assert.match(ran.lines.join("\n"), /RUNNER_MODE is not set/);
});

test("RUNNER_MODE unset: exit 2, one ERROR line naming the choices", async () => {
  const ran = await launch({});
  assert.equal(ran.code, 2);
  assert.equal(ran.lines.length, 1);
  assert.match(ran.lines[0] ?? "", /ERROR agent_runtime\.launcher: RUNNER_MODE is not set; set it to one of: aer, tool/);
});

test("a Python-only mode is refused, not faked", async () => {
  const ran = await launch({ RUNNER_MODE: "oe" });
  assert.equal(ran.code, 2);
  assert.match(ran.lines.join("\n"), /not built into the Node runtime/);
});

test("an entrypoint that fails at import is one structured ERROR record and exit 1", async () => {
  const ran = await launch({ RUNNER_MODE: "aer", RUNTIME_TOKEN: "t0ken-for-test", STRUCTURED_LOGGING: "true", AGENT_ENTRYPOINT: `${brokenAgent}:app`, RUNTIME_PORT: "1" });
  assert.equal(ran.code, 1);
  const records = ran.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  const errors = records.filter((record) => record["level"] === "ERROR");
  assert.equal(errors.length, 1);
  assert.match(String(errors[0]?.["message"]), /^aer start-up failed: the agent module failed at import time/);
  assert.equal(errors[0]?.["error_type"], "Error");
  assert.ok(records.every((record) => typeof record["ts"] === "string" && record["logger"]));
});

test("APP_HOST overrides the probe, and the host is logged as the Python launcher logs it", async () => {
  const ran = await launch(
    { RUNNER_MODE: "tool", RUNTIME_TOKEN: "t0ken-for-test", APP_HOST: "127.0.0.1", RUNTIME_PORT: await freePort(), AGENT_ENTRYPOINT: drainAgent },
    { until: /starting tool on port/ },
  );
  assert.equal(ran.code, 0);
  assert.ok(ran.lines.some((line) => line.endsWith("INFO agent_runtime.launcher: listener bind resolved: host=127.0.0.1")), ran.lines.join("\n"));
});

test("without APP_HOST the probe picks the dual-stack wildcard or IPv4's", async () => {
  const ran = await launch({ RUNNER_MODE: "tool", RUNTIME_TOKEN: "t0ken-for-test", RUNTIME_PORT: await freePort() }, { until: /starting tool on port/ });
  assert.equal(ran.code, 0);
  assert.ok(ran.lines.some((line) => /listener bind resolved: host=(::|0\.0\.0\.0)$/.test(line)), ran.lines.join("\n"));
  assert.equal(chooseListenHost({ appHost: " 10.0.0.1 ", dualStack: true }), "10.0.0.1");
  assert.equal(chooseListenHost({ appHost: undefined, dualStack: true }), "::");
  assert.equal(chooseListenHost({ appHost: "", dualStack: false }), "0.0.0.0");
});
