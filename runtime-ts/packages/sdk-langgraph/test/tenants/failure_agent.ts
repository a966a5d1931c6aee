// A test tenant for platform failure versus tool failure (LG-08, LG-09): a createReactAgent with
// - `flaky_lookup`, which fails on its own (a tool failure: the model reads it);
// - `export_report`, a local tool whose result is larger than the OE takes (8 MiB): the body ran, the OE
//   refuses its result (HTTP 413), a platform failure that ends the turn;
// - `echo`, which answers its text.
// FAILURE_AGENT_SAVER=memory compiles the graph with a plain MemorySaver of its own instead of
// app.checkpointer() (LG-09's documented difference).
import { tool } from "@langchain/core/tools";
import { MemorySaver } from "@langchain/langgraph";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";
import { ToolError } from "@agent-engine/runner";
import { App } from "../../src/index.js";

export const app = new App({ appName: "failure-agent" });

const model = app.llm(
  () =>
    new ChatOpenAI({
      model: process.env["AGENTIC_LLM_MODEL"] ?? "loop-model",
      apiKey: process.env[process.env["AGENTIC_LLM_API_KEY_ENV"] ?? "OPENAI_API_KEY"] ?? "",
      configuration: { baseURL: process.env["AGENTIC_LLM_BASE_URL"] ?? "http://127.0.0.1:9/v1" },
      maxRetries: 0,
    }),
  { llmId: "main" },
);

const flakyLookup = app.tool(
  tool(
    async () => {
      throw new ToolError("the lookup service said: order index rebuilding, try later");
    },
    { name: "flaky_lookup", description: "Look an order up (fails on its own).", schema: z.object({ order: z.string() }) },
  ),
  { isLocal: true },
);

const exportReport = app.tool(
  tool(async () => "x".repeat(9 * 1024 * 1024), {
    name: "export_report",
    description: "Export the full report.",
    schema: z.object({}),
  }),
  { isLocal: true },
);

const echo = app.tool(
  tool(async ({ text }: { text: string }) => text, { name: "echo", description: "Answer the text.", schema: z.object({ text: z.string() }) }),
  { isLocal: true },
);

const ownSaver = new MemorySaver();

app.entrypoint(() =>
  createReactAgent({
    llm: model,
    tools: [flakyLookup, exportReport, echo],
    checkpointer: process.env["FAILURE_AGENT_SAVER"] === "memory" ? ownSaver : app.checkpointer(),
  }),
);
