// The platform checkpointer's cost over its backend saver (tests/benchmarks/bench_langgraph_ts.py runs it):
// put and getTuple p50 of app.checkpointer() against the raw saver it wraps, A-B-B-A rounds in one process,
// on memory, a SQLite file and (when a URI is given) MongoDB. Prints one JSON line.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { emptyCheckpoint, uuid6, MemorySaver } from "@langchain/langgraph-checkpoint";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { MongoDBSaver } from "@langchain/langgraph-checkpoint-mongodb";
import { MongoClient } from "mongodb";
import { PlatformCheckpointer } from "../dist/src/index.js";

const OPS = Number(process.env.BENCH_CHECKPOINT_OPS ?? "200");
const mongoUri = process.argv[2];

async function timed(saver, thread) {
  const put = [];
  const get = [];
  let config = { configurable: { thread_id: thread, checkpoint_ns: "" } };
  for (let i = 0; i < OPS; i += 1) {
    const checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages: [`m${i}`], n: i } };
    let started = performance.now();
    config = await saver.put(config, checkpoint, { source: "loop", step: i, parents: {} }, { messages: i + 1, n: i + 1 });
    put.push(performance.now() - started);
    started = performance.now();
    await saver.getTuple({ configurable: { thread_id: thread, checkpoint_ns: "" } });
    get.push(performance.now() - started);
  }
  return { put, get };
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

async function measure(name, raw) {
  const platform = PlatformCheckpointer.wrapping(raw, { saveGuard: () => undefined, stamp: () => ({ agent_engine_execution_id: "bench" }) });
  const samples = { direct: { put: [], get: [] }, platform: { put: [], get: [] } };
  let round = 0;
  for (const which of ["direct", "platform", "platform", "direct", "direct", "platform", "platform", "direct"]) {
    const saver = which === "direct" ? raw : platform;
    const got = await timed(saver, `${name}-${which}-${round++}`);
    samples[which].put.push(...got.put);
    samples[which].get.push(...got.get);
  }
  return {
    backend: name,
    put_direct_ms: median(samples.direct.put),
    put_platform_ms: median(samples.platform.put),
    get_direct_ms: median(samples.direct.get),
    get_platform_ms: median(samples.platform.get),
  };
}

const results = [await measure("memory", new MemorySaver())];
const dir = mkdtempSync(join(tmpdir(), "bench-cp-"));
const sqlite = SqliteSaver.fromConnString(join(dir, "cp.sqlite3"));
results.push(await measure("sqlite", sqlite));
sqlite.db.close();
rmSync(dir, { recursive: true, force: true });
if (mongoUri) {
  const client = new MongoClient(mongoUri);
  results.push(await measure("mongodb", new MongoDBSaver({ client, dbName: `bench_${Date.now()}` })));
  await client.close();
}
console.log(JSON.stringify({ ops: OPS, results }));
