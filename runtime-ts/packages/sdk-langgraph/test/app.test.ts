// The App's registrations and the pure decisions around governed calls (no run, no OE: what the Tool Pod's
// start-up and the AER's build see).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { tool } from "@langchain/core/tools";
import { MemorySaver, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { ToolExecutionError, PolicyDeniedException } from "@agent-engine/runner";
import { z } from "zod";
import {
  App,
  EXECUTION_KEY,
  GovernedChatModel,
  LangChainModelAdapter,
  openAIToolChoice,
  stableMessageId,
  toolErrorText,
  turnStart,
} from "../src/index.js";
import { HoldRejected, pendingBreakpoint, pendingInterrupt, resumeFor } from "../src/suspend.js";

describe("the App", () => {
  it("registers a LangChain tool with its JSON Schema and returns a governed twin", () => {
    const app = new App({ env: {} });
    const lookup = tool(async ({ order }: { order: string }) => order, {
      name: "lookup",
      description: "Look an order up.",
      schema: z.object({ order: z.string() }),
    });
    const governed = app.tool(lookup, { sensitive: true });
    const spec = app.tools.get("lookup");
    assert.ok(spec?.sensitive);
    assert.deepEqual(spec?.inputSchema, {
      type: "object",
      properties: { order: { type: "string" } },
      required: ["order"],
      additionalProperties: false,
    });
    assert.equal(governed, lookup);
    assert.equal(governed.name, "lookup");
  });

  it("governs the registered tool object itself: outside a run its call reaches no body", async () => {
    const app = new App({ env: {} });
    let ran = 0;
    const refund = tool(
      async () => {
        ran += 1;
        return "refunded";
      },
      { name: "refund", description: "Refund.", schema: z.object({}) },
    );
    app.tool(refund, { sensitive: true });
    // The object the agent might hand to createReactAgent asks the OE (there is no run here), never the body.
    await assert.rejects(refund.invoke({}), /outside a run/);
    assert.equal(ran, 0);
    // The registered body, which the Tool Pod runs after the OE's approval, is the tool as it was.
    assert.equal(await app.tools.get("refund")?.body({}, { executionId: null, step: null }), "refunded");
    assert.equal(ran, 1);
  });

  it("refuses a tool without a description, naming it", () => {
    const app = new App({ env: {} });
    const bare = tool(async () => "x", { name: "bare", description: " ", schema: z.object({}) });
    assert.throws(() => app.tool(bare), /tool "bare" has no description/);
  });

  it("registers a model factory for the Tool Pod without calling it", () => {
    const app = new App({ env: {} });
    let built = 0;
    const model = app.llm(
      () => {
        built += 1;
        throw new Error("never in the AER");
      },
      { llmId: "main" },
    );
    assert.ok(model instanceof GovernedChatModel);
    assert.ok(app.models.get("main") instanceof LangChainModelAdapter);
    assert.equal(built, 0);
    assert.throws(() => app.llm(model), /already governed/);
  });

  it("builds no checkpoint store until it is used", () => {
    const app = new App({ env: { MONGODB_URI: "mongodb://127.0.0.1:9/" } });
    assert.equal(app.checkpointer().store, "mongodb");
    assert.equal(app.checkpointer(), app.checkpointer());
  });
});

describe("governed calls", () => {
  it("tell the model a tool's own failure and a denial, a ToolError verbatim", () => {
    assert.equal(toolErrorText(new ToolExecutionError({ category: "timeout", explanation: "took too long" })), "error (timeout): took too long");
    assert.equal(toolErrorText(new ToolExecutionError({ category: "tool_message", explanation: "try later" })), "try later");
    assert.equal(toolErrorText(new PolicyDeniedException("not on weekends")), "denied by policy: not on weekends");
  });

  it("spell tool_choice as chat completions do, and give an id-less answer a stable id", () => {
    assert.equal(openAIToolChoice("any"), "required");
    assert.deepEqual(openAIToolChoice("lookup"), { type: "function", function: { name: "lookup" } });
    const answer = { type: "ai", content: "hi" };
    assert.equal(stableMessageId(answer), stableMessageId({ ...answer }));
    assert.notEqual(stableMessageId(answer), stableMessageId({ type: "ai", content: "ho" }));
  });
});

describe("a node's interrupt()", () => {
  it("is held with its value as the payload and resumed with the reviewer's value", () => {
    const hold = pendingInterrupt({ messages: [], __interrupt__: [{ id: "i-1", value: { question: "ok?" } }] });
    assert.deepEqual(hold, { interruptId: "i-1", args: { reason: "interrupt", payload: { question: "ok?" }, kind: "interrupt" } });
    assert.equal(pendingInterrupt({ messages: [] }), undefined);
    assert.deepEqual(resumeFor(hold!, { decision: "approved", value: 42 }, 3), { "i-1": 42 });
    assert.throws(() => resumeFor(hold!, { decision: "rejected", reviewer_notes: "no" }, 3), (e: Error) => e instanceof HoldRejected && /step 3: no/.test(e.message));
  });

  it("a static breakpoint is held with the nodes to run next, and continues with no input", () => {
    const hold = pendingBreakpoint(["send"]);
    assert.deepEqual(hold?.args, { reason: "breakpoint before send", payload: { next: ["send"] }, kind: "breakpoint" });
    assert.equal(pendingBreakpoint([]), undefined);
    assert.equal(resumeFor(hold!, { decision: "approved" }, 2), null);
    assert.throws(() => resumeFor(hold!, { decision: "rejected" }, 2), /rejected the graph's breakpoint at step 2/);
  });
});

describe("the turn a resume replays", () => {
  async function save(saver: MemorySaver, threadId: string, parent: string | undefined, source: "input" | "loop", owner?: string) {
    const config = { configurable: { thread_id: threadId, checkpoint_ns: "", ...(parent ? { checkpoint_id: parent } : {}) } };
    const metadata = { source, step: source === "input" ? -1 : 0, parents: {}, ...(owner ? { [EXECUTION_KEY]: owner } : {}) };
    const saved = await saver.put(config, { ...emptyCheckpoint(), id: uuid6(-1) }, metadata);
    return String(saved.configurable?.["checkpoint_id"]);
  }

  it("starts at the execution's own input checkpoint", async () => {
    const saver = new MemorySaver();
    const a = await save(saver, "t", undefined, "input", "e1");
    const b = await save(saver, "t", a, "loop", "e1");
    const c = await save(saver, "t", b, "input", "e2");
    await save(saver, "t", c, "loop", "e2");
    assert.deepEqual(await turnStart(saver, "t", "e2"), { checkpointId: c });
    assert.deepEqual(await turnStart(saver, "t", "e1"), { missing: "another_turn" });
    assert.deepEqual(await turnStart(saver, "empty", "e1"), { missing: "no_checkpoint" });
  });

  it("with a saver that stamps nothing, starts at the thread's latest input checkpoint", async () => {
    const saver = new MemorySaver();
    const a = await save(saver, "t", undefined, "input");
    const b = await save(saver, "t", a, "loop");
    const c = await save(saver, "t", b, "input");
    await save(saver, "t", c, "loop");
    assert.deepEqual(await turnStart(saver, "t", "any"), { checkpointId: c });
  });
});
