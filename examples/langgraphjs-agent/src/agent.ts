// A LangGraph.js ReAct agent on Agent Engine (AGENT_ENTRYPOINT=/app/dist/agent.js:app).
//
// The graph is LangGraph's own createReactAgent. What the platform adds, and only this: the model is
// registered with app.llm (it runs in the Tool Pod, with its key, every call an OE step), the tools with
// app.tool (every call an OE step: policy, audit, replay), and the graph is compiled with the platform
// checkpointer. `issue_refund` is sensitive: the OE holds each call for a reviewer, and only an approved
// call runs, once, in the Tool Pod.
import { tool } from "@langchain/core/tools";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";
import { App } from "@agent-engine/sdk-langgraph";

export const app = new App({ appName: "refund-desk" });

// The model's settings come from the platform's env (the Agent's spec.model); its key is read in the Tool
// Pod only, where the factory runs. The AER never builds it.
const model = app.llm(
  () =>
    new ChatOpenAI({
      model: process.env["AGENTIC_LLM_MODEL"] ?? "gpt-4o-mini",
      apiKey: process.env[process.env["AGENTIC_LLM_API_KEY_ENV"] ?? "OPENAI_API_KEY"] ?? "",
      configuration: { baseURL: process.env["AGENTIC_LLM_BASE_URL"] ?? "https://api.openai.com/v1" },
      temperature: 0,
    }),
  { llmId: "main" },
);

const ORDERS: Record<string, { amount: number; currency: string; status: string }> = {
  A100: { amount: 42, currency: "EUR", status: "delivered" },
  B200: { amount: 7.5, currency: "EUR", status: "lost in transit" },
};

// Local: runs in the AER after the OE approves each call (a pure lookup needs no credential).
const lookupOrder = app.tool(
  tool(
    async ({ order }: { order: string }) => ORDERS[order] ?? { error: `no order ${order}` },
    {
      name: "lookup_order",
      description: "Look up an order by its id: its amount, currency and delivery status.",
      schema: z.object({ order: z.string().describe("the order id, e.g. A100") }),
    },
  ),
  { isLocal: true },
);

// Sensitive: held for a reviewer; runs in the Tool Pod, the only place REFUND_TOKEN exists.
const issueRefund = app.tool(
  tool(
    async ({ order, amount }: { order: string; amount: number }) => {
      const base = process.env["REFUND_PROVIDER_URL"] ?? "";
      const response = await fetch(`${base}/effects/refund`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${process.env["REFUND_TOKEN"] ?? ""}`,
          // One refund per order: a retried call is the same refund to the provider.
          "idempotency-key": `refund-${order}`,
        },
        body: JSON.stringify({ order, amount }),
      });
      if (!response.ok) throw new Error(`the refund provider answered ${response.status}`);
      return { refunded: order, amount };
    },
    {
      name: "issue_refund",
      description: "Refund an order's amount to the customer. Irreversible.",
      schema: z.object({ order: z.string(), amount: z.number().positive() }),
    },
  ),
  { sensitive: true, requiredSecrets: ["REFUND_TOKEN"] },
);

app.entrypoint(() =>
  createReactAgent({
    llm: model,
    tools: [lookupOrder, issueRefund],
    prompt: "You are a refund desk. Look the order up before refunding it.",
    checkpointer: app.checkpointer(),
  }),
);
