// app.checkpointer() over memory (CHECKPOINT_STORE=memory) against the LangGraph.js conformance suite.
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { App } from "../src/index.js";

validate({
  checkpointerName: "app.checkpointer() (memory)",
  createCheckpointer: () => new App({ appName: "validation", env: { CHECKPOINT_STORE: "memory" } }).checkpointer(),
});
