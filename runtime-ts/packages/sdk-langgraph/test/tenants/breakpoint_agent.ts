// A test tenant for a static breakpoint held in the OE: `write` calls a governed local tool, the graph is
// compiled with interruptBefore: ["send"], and `send` calls a governed Tool Pod tool that POSTs to the
// ledger provider (one effect per reply).
import { AIMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Annotation, END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { z } from "zod";
import { App } from "../../src/index.js";

export const app = new App({ appName: "breakpoint-agent" });

const echo = app.tool(
  tool(async ({ text }: { text: string }) => text, { name: "echo", description: "Answer the text.", schema: z.object({ text: z.string() }) }),
  { isLocal: true },
);

const sendReply = app.tool(
  tool(
    async ({ text }: { text: string }) => {
      const response = await fetch(`${process.env["REFUND_PROVIDER_URL"] ?? ""}/effects/send`, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": "reply-2" },
        body: JSON.stringify({ order: "reply-2", text }),
      });
      if (!response.ok) throw new Error(`the provider answered ${response.status}`);
      return { sent: text };
    },
    { name: "send_reply", description: "Send the reply to the customer.", schema: z.object({ text: z.string() }) },
  ),
);

const State = Annotation.Root({ ...MessagesAnnotation.spec, draft: Annotation<string>() });

app.entrypoint(() =>
  new StateGraph(State)
    .addNode("write", async () => ({ draft: String(await echo.invoke({ text: "We shipped it again." })) }))
    .addNode("send", async (state) => {
      await sendReply.invoke({ text: state.draft });
      return { messages: [new AIMessage(`sent: ${state.draft}`)] };
    })
    .addEdge(START, "write")
    .addEdge("write", "send")
    .addEdge("send", END)
    .compile({ checkpointer: app.checkpointer(), interruptBefore: ["send"] }),
);
