// A test tenant for the runner's app.suspend(reason, payload) inside a LangGraph node: the node asks for a
// human at a step of its own; the resumed run replays the turn and app.suspend returns the decision there.
// Its threads are keyed by its own resolver.
import { AIMessage } from "@langchain/core/messages";
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { App } from "../../src/index.js";

export const app = new App({ appName: "suspend-agent" });
// The agent's own thread key (LG-05): used verbatim for the new run and its resume, no workspace suffix.
app.resolveThreadId((ctx) => `${ctx.sessionId ?? ctx.executionId}__${ctx.userId ?? "anonymous"}`);

app.entrypoint(() =>
  new StateGraph(MessagesAnnotation)
    .addNode("escalate", async () => {
      const decision = app.suspend("a refund above 100 EUR needs a manager", { order: "C300", amount: 250 });
      return { messages: [new AIMessage(`manager said ${decision.decision}: ${decision.reviewer_notes ?? ""}`)] };
    })
    .addEdge(START, "escalate")
    .addEdge("escalate", END)
    .compile({ checkpointer: app.checkpointer() }),
);
