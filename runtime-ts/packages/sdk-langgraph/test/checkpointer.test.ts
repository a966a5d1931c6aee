// The checkpoint settings (CP-01..CP-04, LG-04) and the platform checkpointer's two refusals (LG-07, LG-08).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MemorySaver, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import {
  CheckpointConfigError,
  CheckpointScopeError,
  EXECUTION_KEY,
  PlatformCheckpointer,
  checkpointSettings,
  describeSettings,
  mongoDbName,
} from "../src/index.js";

describe("checkpoint settings", () => {
  it("scopes the MongoDB database by the project part of APP_ID", () => {
    assert.equal(mongoDbName({ APP_ID: "team-a.support" }), "mdb_store_team_a");
    assert.equal(mongoDbName({ APP_ID: "team-a.support", MDB_AGENTIC_STORE_DB: "base" }), "base_team_a");
    assert.equal(mongoDbName({}), "mdb_store");
    assert.equal(mongoDbName({ APP_ID: "team-a.support", CHECKPOINT_DB_NAME: "shared_db" }), "shared_db");
  });

  it("names the variable and the fix for a database name MongoDB refuses", () => {
    assert.throws(() => mongoDbName({ CHECKPOINT_DB_NAME: "a.b" }), (e: Error) => e instanceof CheckpointConfigError && e.message.includes("CHECKPOINT_DB_NAME"));
    assert.throws(
      () => mongoDbName({ APP_ID: `${"x".repeat(60)}.agent` }),
      (e: Error) => e instanceof CheckpointConfigError && e.message.includes("MDB_AGENTIC_STORE_DB") && e.message.includes("63"),
    );
  });

  it("picks mongodb with MONGODB_URI, else sqlite, and refuses an unknown store by name", () => {
    assert.equal(checkpointSettings({ MONGODB_URI: "mongodb://127.0.0.1:1/" }).store, "mongodb");
    assert.equal(checkpointSettings({}).store, "sqlite");
    assert.throws(() => checkpointSettings({ CHECKPOINT_STORE: "redis" }), /CHECKPOINT_STORE="redis": use mongodb, sqlite or memory/);
    assert.throws(() => checkpointSettings({ CHECKPOINT_STORE: "mongodb" }), /needs MONGODB_URI/);
    assert.throws(() => checkpointSettings({ MONGODB_URI: "http://x" }), /MONGODB_URI must start with mongodb:\/\//);
  });

  it("never shows the MongoDB URI, which may carry a password", () => {
    const settings = checkpointSettings({ MONGODB_URI: "mongodb://user:s3cret-canary@127.0.0.1:1/" });
    assert.ok(!describeSettings(settings).includes("s3cret-canary"));
  });
});

function put(saver: PlatformCheckpointer, threadId: string) {
  const checkpoint = { ...emptyCheckpoint(), id: uuid6(-1) };
  return saver.put({ configurable: { thread_id: threadId, checkpoint_ns: "" } }, checkpoint, { source: "input", step: -1, parents: {} }, {});
}

describe("the platform checkpointer", () => {
  it("fails closed in a managed runtime without APP_ID: reads and saves throw, nothing is written", async () => {
    const backend = new MemorySaver();
    const settings = checkpointSettings({ CHECKPOINT_STORE: "memory", REQUIRE_PROJECT_SCOPED_DB: "true" });
    const saver = PlatformCheckpointer.wrapping(backend, { refusal: settings.refusal });
    await assert.rejects(put(saver, "s:"), (e: Error) => e instanceof CheckpointScopeError && e.message.includes("APP_ID"));
    await assert.rejects(saver.getTuple({ configurable: { thread_id: "s:" } }), CheckpointScopeError);
    await assert.rejects(saver.putWrites({ configurable: { thread_id: "s:", checkpoint_id: "x", checkpoint_ns: "" } }, [["a", 1]], "t"), CheckpointScopeError);
    assert.equal(await backend.getTuple({ configurable: { thread_id: "s:" } }), undefined);
  });

  it("with APP_ID in a managed runtime, works", async () => {
    const settings = checkpointSettings({ CHECKPOINT_STORE: "memory", REQUIRE_PROJECT_SCOPED_DB: "true", APP_ID: "ns.agent" });
    assert.equal(settings.refusal, undefined);
  });

  it("refuses every save after a platform failure (pending writes too), and keeps nothing of it", async () => {
    const backend = new MemorySaver();
    let failure: string | null = null;
    const saver = PlatformCheckpointer.wrapping(backend, { saveGuard: (what) => (failure === null ? undefined : new Error(`${what} refused: ${failure}`)) });
    const saved = await put(saver, "t1");
    failure = "the OE's answer was lost";
    await assert.rejects(put(saver, "t1"), /save refused: the OE's answer was lost/);
    await assert.rejects(saver.putWrites(saved, [["messages", "failure text"]], "task-1"), /pending writes refused/);
    const kept = await backend.getTuple({ configurable: { thread_id: "t1" } });
    assert.equal(kept?.checkpoint.id, saved.configurable?.["checkpoint_id"]);
    assert.deepEqual(kept?.pendingWrites ?? [], []);
    // Reads still work: the history and the next turn read what was kept.
    assert.ok(await saver.getTuple({ configurable: { thread_id: "t1" } }));
  });

  it("stamps each save with the execution that made it", async () => {
    const backend = new MemorySaver();
    const saver = PlatformCheckpointer.wrapping(backend, { stamp: () => ({ [EXECUTION_KEY]: "exec-1" }) });
    await put(saver, "t2");
    const found = await backend.getTuple({ configurable: { thread_id: "t2" } });
    assert.equal((found?.metadata as Record<string, unknown>)[EXECUTION_KEY], "exec-1");
  });

  it("opens nothing until the first read or save", async () => {
    // A MongoDB URI nothing listens on: building the checkpointer (what the Tool Pod's build does) is fine.
    const saver = PlatformCheckpointer.fromSettings(checkpointSettings({ MONGODB_URI: "mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=200" }));
    assert.equal(saver.store, "mongodb");
    await assert.rejects(saver.getTuple({ configurable: { thread_id: "x" } }));
    await saver.close();
  });
});
