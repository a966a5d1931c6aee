// LangChain <-> platform messages (LG-14) and stopped tool calls.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { STOPPED_TEXT, completeStoppedToolCalls, fromPlatform, stoppedAnswers, toPlatform, MessageError } from "../src/index.js";

describe("messages", () => {
  it("keep id, name, kwargs, metadata, tool calls and usage through a round trip", () => {
    const ai = new AIMessage({
      content: "calling",
      id: "msg-1",
      name: "lead",
      additional_kwargs: { refusal: null },
      response_metadata: { model_name: "m" },
      tool_calls: [{ id: "call-1", name: "refund", args: { order: "A1" }, type: "tool_call" }],
    });
    Object.assign(ai, { usage_metadata: { input_tokens: 3, output_tokens: 2, total_tokens: 5 } });
    const platform = toPlatform(ai);
    assert.deepEqual(platform["tool_calls"], [{ id: "call-1", name: "refund", args: { order: "A1" } }]);
    const back = fromPlatform(platform) as AIMessage;
    assert.equal(back.id, "msg-1");
    assert.equal(back.name, "lead");
    assert.deepEqual(back.response_metadata, { model_name: "m" });
    assert.deepEqual(back.tool_calls?.[0]?.args, { order: "A1" });
    assert.equal((back as unknown as { usage_metadata?: { total_tokens: number } }).usage_metadata?.total_tokens, 5);
    assert.deepEqual(toPlatform(back), platform);
  });

  it("read OpenAI-style dicts and name the field of a bad one", () => {
    const ai = fromPlatform({ role: "assistant", content: null, tool_calls: [{ id: "c", function: { name: "f", arguments: '{"a":1}' } }] }) as AIMessage;
    assert.deepEqual(ai.tool_calls?.[0]?.args, { a: 1 });
    assert.throws(() => fromPlatform({ type: "tool", content: "x" }), (e: Error) => e instanceof MessageError && e.message.startsWith("message.tool_call_id"));
    assert.throws(() => fromPlatform({ type: "robot", content: "x" }), /message.type/);
  });
});

describe("stopped tool calls", () => {
  it("answer each unanswered call with the fixed text, never the failure's", () => {
    const messages = [
      new HumanMessage("refund A1"),
      new AIMessage({ content: "", tool_calls: [{ id: "c1", name: "refund", args: {} }, { id: "c2", name: "lookup", args: {} }] }),
      new ToolMessage({ content: "ok", tool_call_id: "c2" }),
      new HumanMessage("and now?"),
    ];
    const completed = completeStoppedToolCalls(messages);
    assert.equal(completed.length, 5);
    const stopped = completed[3] as ToolMessage;
    assert.equal(stopped.tool_call_id, "c1");
    assert.equal(stopped.content, STOPPED_TEXT);
    assert.deepEqual(stoppedAnswers(messages).map((m) => m.tool_call_id), ["c1"]);
  });
});
