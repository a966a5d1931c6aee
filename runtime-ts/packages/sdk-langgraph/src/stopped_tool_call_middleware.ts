// Tool calls a turn asked for but never answered, made whole before the next model call.
//
// A platform failure ends a turn in the middle of its tools step, and the platform checkpointer keeps
// nothing of that step (LG-08), so the thread's last AI message can hold tool calls without their tool
// messages. Providers (and createReactAgent's history check) refuse such a conversation. Each unanswered
// call gets a fixed tool message saying it was stopped: no failure text (it never reaches the model), and
// the same every time, so the call's fingerprint does not change on replay.
import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";

export const STOPPED_TEXT = "this tool call was stopped before it finished; its outcome is unknown";

function stopped(id: string, name: string): ToolMessage {
  return new ToolMessage({ content: STOPPED_TEXT, tool_call_id: id, name, status: "error" });
}

/** A stopped-call tool message for each tool call in `messages` that no tool message answers. */
export function stoppedAnswers(messages: readonly BaseMessage[]): ToolMessage[] {
  const answered = new Set(messages.filter((m) => ToolMessage.isInstance(m)).map((m) => (m as ToolMessage).tool_call_id));
  const out: ToolMessage[] = [];
  for (const message of messages) {
    if (!AIMessage.isInstance(message)) continue;
    for (const call of message.tool_calls ?? []) {
      if (call.id && !answered.has(call.id)) out.push(stopped(call.id, call.name));
    }
  }
  return out;
}

/** `messages` with a stopped-call tool message after each AI message's unanswered tool calls. */
export function completeStoppedToolCalls(messages: readonly BaseMessage[]): BaseMessage[] {
  const out: BaseMessage[] = [];
  let index = 0;
  while (index < messages.length) {
    const message = messages[index] as BaseMessage;
    out.push(message);
    index += 1;
    if (!AIMessage.isInstance(message) || !message.tool_calls?.length) continue;
    const answered = new Set<string>();
    for (let next = messages[index]; next !== undefined && ToolMessage.isInstance(next); next = messages[index]) {
      answered.add(next.tool_call_id);
      out.push(next);
      index += 1;
    }
    for (const call of message.tool_calls) {
      if (call.id && !answered.has(call.id)) out.push(stopped(call.id, call.name));
    }
  }
  return out;
}
