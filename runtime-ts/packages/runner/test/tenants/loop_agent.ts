// The tenant App the TS runner's loop tests run (tests/integration/ts_runner), the TS twin of the loop
// tier's tests/integration/loop/tenant/loop_agent.py: local and remote tools, a sensitive side effect the
// tests count in a ledger file, failures, a human review, and a model-driven tool loop through app.llm.
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { App, ChatCompletionsModel, streamChunk, type Message } from "../../src/index.js";

export const app = new App("loop-agent-ts");

const object = (properties: Record<string, string>): Record<string, unknown> => ({
  type: "object",
  properties: Object.fromEntries(Object.entries(properties).map(([name, type]) => [name, { type }])),
  required: Object.keys(properties),
});

app.tool({ name: "word_count", description: "Count the words in a text.", isLocal: true, inputSchema: object({ text: "string" }) }, (args) => ({
  words: String(args["text"]).split(/\s+/).filter(Boolean).length,
}));
app.tool({ name: "shout", description: "Upper-case a text.", inputSchema: object({ text: "string" }) }, (args) => ({ loud: String(args["text"]).toUpperCase() }));
app.tool(
  { name: "transfer", description: "Move money (a side effect).", sensitive: true, requiredSecrets: ["LOOP_LEDGER"], inputSchema: object({ amount: "integer", to: "string" }) },
  (args) => {
    const ledger = process.env["LOOP_LEDGER"] ?? "";
    appendFileSync(ledger, `${String(args["amount"])} ${String(args["to"])}\n`);
    return { ok: true, entries: readFileSync(ledger, "utf8").split("\n").filter(Boolean).length };
  },
);
app.tool({ name: "explode", description: "Always fails.", inputSchema: object({ text: "string" }) }, (args) => {
  throw new Error(`exploded on ${String(args["text"])}`);
});
app.tool({ name: "leak", description: "Prints and returns the Tool Pod's secret (it must never leave unredacted).", inputSchema: object({}) }, () => {
  const secret = process.env["LOOP_SECRET"] ?? "";
  console.log(`the secret is ${secret}`);
  console.error(Buffer.from(secret).toString("base64"));
  process.stdout.write(Buffer.from(`raw bytes ${secret}\n`));
  return { value: secret, encoded: Buffer.from(secret).toString("base64") };
});
app.tool({ name: "ask_human", description: "Stop for a human's answer.", inputSchema: object({ question: "string" }) }, (args) =>
  app.suspend("a human must answer", { question: args["question"] }),
);
app.tool({ name: "send_notification", description: "Notify (a side effect).", requiredSecrets: ["LOOP_LEDGER"], inputSchema: object({ text: "string" }) }, (args) => {
  appendFileSync(process.env["LOOP_LEDGER"] ?? "", `notify ${String(args["text"])}\n`);
  return { sent: args["text"] };
});

app.tool(
  { name: "wait_for_file", description: "Block until a file exists (a test holds a run with it).", isLocal: true, timeoutS: 60, inputSchema: object({ path: "string" }) },
  async (args) => {
    const path = String(args["path"]);
    const deadline = Date.now() + 55_000;
    while (!existsSync(path)) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${path}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return { seen: path };
  },
);

// The model runs in the Tool Pod only (its key is there); the AER's app.llm("main") asks the OE for it.
app.model("main", () => ChatCompletionsModel.fromEnv(process.env));

interface Task {
  readonly mode?: string;
  readonly text?: string;
  readonly calls?: [string, Record<string, unknown>][];
  readonly agent_level?: boolean;
}

app.entrypoint(async (input, run) => {
  const task = (input ?? {}) as Task;
  const mode = task.mode ?? "llm";
  if (mode === "llm") {
    const llm = app.llm("main");
    const messages: Message[] = [{ type: "human", content: task.text ?? "" }];
    for (let turn = 0; turn < 8; turn += 1) {
      const message = await llm.invoke(messages, { tools: run.tools });
      messages.push(message);
      const calls = (message["tool_calls"] as { id: string; name: string; args: Record<string, unknown> }[] | undefined) ?? [];
      if (calls.length === 0) return { answer: message["content"] };
      const results = await Promise.allSettled(calls.map((call) => app.callTool(call.name, call.args)));
      calls.forEach((call, index) => {
        const outcome = results[index];
        const content = outcome?.status === "fulfilled" ? JSON.stringify(outcome.value) : String((outcome?.reason as Error | undefined)?.message);
        messages.push({ type: "tool", tool_call_id: call.id, content });
      });
    }
    throw new Error("the model never answered");
  }
  if (mode === "calls") {
    const results: unknown[] = [];
    for (const [name, args] of task.calls ?? []) {
      try {
        results.push(await app.callTool(name, args));
      } catch (error) {
        const failure = error as Error;
        results.push({ error: failure.name, text: failure.message });
      }
    }
    return { results };
  }
  if (mode === "review") {
    const decision = task.agent_level
      ? app.suspend("approve the claims?", { summary: "P-7" })
      : ((await app.callTool("ask_human", { question: "approve the claims?" })) as { decision: string });
    const sent = await app.callTool("send_notification", { text: `claims ${decision.decision}` });
    return { decision, sent };
  }
  if (mode === "custom_stream") {
    // A framework's own stream chunks: sent only for the modes the client asked for.
    const sent: boolean[] = [];
    for (let index = 0; index < 3; index += 1) sent.push(await streamChunk("custom", { progress: index }));
    sent.push(await streamChunk("values", { never: "asked for" }));
    return { sent };
  }
  throw new Error(`unknown mode '${mode}'`);
});
