// A test tenant for LangGraph's own interrupt() held in the OE: `write` calls a governed local tool,
// `review` asks a human with interrupt() (the reviewer's value is what it returns), `send` calls a
// governed Tool Pod tool with that value, which POSTs to the ledger provider (one effect per reply).
import { AIMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Annotation, END, MessagesAnnotation, START, StateGraph, interrupt } from "@langchain/langgraph";
import { z } from "zod";
import { App } from "../../src/index.js";

export const app = new App({ appName: "interrupt-agent" });

const echo = app.tool(
  tool(async ({ text }: { text: string }) => text, { name: "echo", description: "Answer the text.", schema: z.object({ text: z.string() }) }),
  { isLocal: true },
);

const sendReply = app.tool(
  tool(
    async ({ text }: { text: string }) => {
      const response = await fetch(`${process.env["REFUND_PROVIDER_URL"] ?? ""}/effects/send`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": "reply-1" },
        body: JSON.stringify({ order: "reply-1", text }),
      });
      if (!response.ok) throw new Error(`the provider answered ${response.status}`);
      return { sent: text };
    },
    { name: "send_reply", description: "Send the reply to the customer.", schema: z.object({ text: z.string() }) },
  ),
);

const State = Annotation.Root({ ...MessagesAnnotation.spec, draft: Annotation<string>(), approved: Annotation<string>() });

app.entrypoint(() =>
  new StateGraph(State)
    .addNode("write", async () => ({ draft: String(await echo.invoke({ text: "We will refund B200." })) }))
    .addNode("review", async (state) => {
      const answer = interrupt({ question: "send this reply?", draft: state.draft }) as { text?: string } | null;
      return { approved: answer?.text ?? state.draft };
    })
    .addNode("send", async (state) => {
      await sendReply.invoke({ text: state.approved });
      return { messages: [new AIMessage(`sent: ${state.approved}`)] };
    })
    .addEdge(START, "write")
    .addEdge("write", "review")
    .addEdge("review", "send")
    .addEdge("send", END)
    .compile({ checkpointer: app.checkpointer() }),
);
