// The tenant App the drain and interrupt/call vectors run in the TS AER and Tool Pod
// (tests/integration/drain), the twin of tests/integration/drain/tenant/drain_agent.py. Each kind of work
// exists twice: `aer_*` tools are local (bodies run in the AER), `pod_*` remote (they run in the Tool Pod).
// Every body first touches its `marker` file; a held body then waits for its `release` file:
// - `*_quick`: returns at once;
// - `*_hold_async`: abortable: it takes the call's AbortSignal and stops when it is aborted (the
//   vectors' `cooperative` work); touches `<marker>.ended` when it stops, however it stops;
// - `*_hold_sync`: a plain tool function polling the file, given no signal (the vectors' `sync` work: in
//   TypeScript a promise cannot be cancelled, so nothing can stop it).
import { existsSync, writeFileSync } from "node:fs";
import { App } from "../../src/index.js";

export const app = new App("drain-agent");
const HOLD_LIMIT_MS = 60_000;
const schema = (...names: string[]): Record<string, unknown> => ({
  type: "object",
  properties: Object.fromEntries(names.map((name) => [name, { type: "string" }])),
  required: names,
});

function touch(path: string): void {
  writeFileSync(path, "");
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

async function holdAbortable(marker: string, release: string, signal: AbortSignal | undefined): Promise<unknown> {
  touch(marker);
  try {
    const deadline = Date.now() + HOLD_LIMIT_MS;
    while (!existsSync(release)) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${release}`);
      await sleep(10, signal);
    }
    return { released: true };
  } finally {
    touch(marker + ".ended");
  }
}

async function holdPlain(marker: string, release: string): Promise<unknown> {
  touch(marker);
  const deadline = Date.now() + HOLD_LIMIT_MS;
  while (!existsSync(release)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${release}`);
    await sleep(10);
  }
  return { released: true };
}

const str = (value: unknown): string => String(value);

for (const [prefix, isLocal] of [["aer", true], ["pod", false]] as const) {
  app.tool({ name: `${prefix}_quick`, isLocal, inputSchema: schema("marker") }, (args) => {
    touch(str(args["marker"]));
    return { ok: true };
  });
  app.tool(
    { name: `${prefix}_hold_async`, isLocal, abortable: true, timeoutS: HOLD_LIMIT_MS / 1000 + 5, inputSchema: schema("marker", "release") },
    (args, context) => holdAbortable(str(args["marker"]), str(args["release"]), context.signal),
  );
  app.tool(
    { name: `${prefix}_hold_sync`, isLocal, timeoutS: HOLD_LIMIT_MS / 1000 + 5, inputSchema: schema("marker", "release") },
    (args) => holdPlain(str(args["marker"]), str(args["release"])),
  );
}

interface Call {
  readonly tool: string;
  readonly args: Record<string, unknown>;
}

// The entrypoint runs `input.plan`: groups of calls, one group after another, the calls of a group together.
// A call's failure is recorded and the run goes on, so later steps still happen.
app.entrypoint(async (input) => {
  const plan = ((input as { plan?: Call[][] } | null)?.plan ?? []) as Call[][];
  const results: unknown[] = [];
  for (const group of plan) {
    // Started in list order, so their steps are numbered in that order (Decision 4).
    const calls = group.map((call) => app.callTool(call.tool, call.args));
    for (const outcome of await Promise.allSettled(calls)) {
      if (outcome.status === "fulfilled") results.push(outcome.value);
      else {
        const error = outcome.reason as Error;
        results.push({ error: error.name, text: error.message });
      }
    }
  }
  return { results };
});
