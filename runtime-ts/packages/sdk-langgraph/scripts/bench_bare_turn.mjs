// The bare twin of the SDK's failure_agent tenant for tests/benchmarks/bench_langgraph_ts.py: the same
// createReactAgent (ChatOpenAI against the LLM peer, the `echo` tool run in process, a MemorySaver), no
// platform. Reads "run" lines on stdin and answers each with the turn's milliseconds.
import { createInterface } from "node:readline";
import { tool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";

const echo = tool(async ({ text }) => text, { name: "echo", description: "Answer the text.", schema: z.object({ text: z.string() }) });
const model = new ChatOpenAI({
  model: "loop-model",
  apiKey: process.env.BENCH_LLM_KEY ?? "",
  configuration: { baseURL: process.env.BENCH_LLM_BASE_URL ?? "" },
  maxRetries: 0,
});
let turn = 0;
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() !== "run") continue;
  turn += 1;
  const started = performance.now();
  // Built per turn, as the platform's entrypoint builds it per execution.
  const graph = createReactAgent({ llm: model, tools: [echo], checkpointer: new MemorySaver() });
  await graph.invoke({ messages: [{ role: "user", content: "echo hi" }] }, { configurable: { thread_id: `t${turn}` } });
  console.log(String(performance.now() - started));
}
