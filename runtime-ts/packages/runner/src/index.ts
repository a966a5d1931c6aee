// @agent-engine/runner: the TypeScript runtime's core. Framework SDKs build on App; the launcher runs it.
export { App, ToolSpec, ToolDefinitionError, DEFAULT_TOOL_TIMEOUT_S, isApp } from "./app.js";
export type { ToolOptions, ToolBody, ToolCallContext, Entrypoint } from "./app.js";
export type { RunContext, RequestContext } from "./run_context.js";
export { currentRun } from "./run_context.js";
export { SecureWrappedLLM } from "./secure_llm.js";
export { SecureToolWrapper } from "./secure_tool.js";
export { streamChunk, streamsMode } from "./stream_chunks.js";
export type { StreamMode } from "./stream_chunks.js";
export type { ModelSource } from "./app.js";
export type { InvokeOptions } from "./secure_llm.js";
export type { ModelRunner, ModelCall, Message } from "./model.js";
export { ChatCompletionsModel } from "./chat_completions.js";
export { ModelError } from "./model.js";
export { PlatformFailure, PolicyDeniedException, SuspendRequested, ToolError, ToolExecutionError } from "./sdk_errors.js";
export { CallInterrupted, ExecutionDraining } from "./call_errors.js";
export { setupLogging, getLogger, withLogContext } from "./logging.js";
export * as protocol from "./protocol.js";
