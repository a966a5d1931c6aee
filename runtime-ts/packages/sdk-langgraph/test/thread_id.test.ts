// Thread ids (LG-05) and scoped reads (LG-06).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HumanMessage } from "@langchain/core/messages";
import { MemorySaver, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { App, ThreadIdError, defaultThreadId, resolveThreadId, sessionMessages, CheckpointScopeError } from "../src/index.js";

const ctx = { executionId: "exec-1", sessionId: "sess", workspaceId: "ns.agent", userId: "alice", orgId: null };

describe("thread ids", () => {
  it("default to session:workspace, and an execution without a session is its own thread", () => {
    assert.equal(defaultThreadId(ctx, "ns.agent"), "sess:ns.agent");
    assert.equal(defaultThreadId({ ...ctx, sessionId: null }, "ns.agent"), "exec-1:ns.agent");
    assert.equal(defaultThreadId({ ...ctx, workspaceId: "" }, ""), "sess:");
  });

  it("never come from a request naming another workspace than APP_ID", () => {
    assert.throws(() => defaultThreadId({ ...ctx, workspaceId: "other.agent" }, "ns.agent"), ThreadIdError);
  });

  it("use a resolver's value verbatim, with no workspace suffix, the same every call", () => {
    const resolver = (c: typeof ctx) => `${c.sessionId}__${c.userId}`;
    assert.equal(resolveThreadId(ctx, { resolver, appId: "ns.agent" }), "sess__alice");
    assert.equal(resolveThreadId({ ...ctx, executionId: "exec-2" }, { resolver, appId: "ns.agent" }), "sess__alice");
  });

  it("refuse a resolver's empty or non-string value, naming the resolver", () => {
    const empty = function emptyKey() {
      return "";
    };
    assert.throws(() => resolveThreadId(ctx, { resolver: empty, appId: "" }), /emptyKey returned an empty string/);
    assert.throws(() => resolveThreadId(ctx, { resolver: () => 42 as unknown as string, appId: "" }), /returned number/);
  });

  it("fail closed through the App in a managed runtime without APP_ID", () => {
    const app = new App({ env: { REQUIRE_PROJECT_SCOPED_DB: "1", CHECKPOINT_STORE: "memory" } });
    const context = { ...ctx, resume: false, tools: [], signal: new AbortController().signal };
    assert.throws(() => app.threadId(context), CheckpointScopeError);
  });
});

describe("scoped reads", () => {
  it("serve sess:ws1 only, never the legacy unscoped key next to it", async () => {
    const saver = new MemorySaver();
    const write = (threadId: string, text: string) =>
      saver.put(
        { configurable: { thread_id: threadId, checkpoint_ns: "" } },
        { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages: [new HumanMessage(text)] } },
        { source: "loop", step: 0, parents: {} },
      );
    await write("sess", "legacy, unscoped");
    await write("sess:ws1", "scoped");
    const messages = await sessionMessages(saver, "sess", { workspaceId: "ws1" });
    assert.deepEqual(messages.map((m) => m["content"]), ["scoped"]);
    assert.deepEqual(await sessionMessages(saver, "sess", { workspaceId: "ws2" }), []);
  });
});
