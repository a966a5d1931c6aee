// OpenAPI connectors of the bundle, executed in the Tool Pod. (Filled in by the connector core step.)
import type { ConnectorRunner } from "./tool_pod.js";
import { BundleError } from "./bundle.js";

export function openApiConnectors(documents: readonly Record<string, unknown>[], _secretEnv: Readonly<Record<string, string>>): ConnectorRunner {
  if (documents.length > 0) throw new BundleError("OpenAPI connectors are not run by the Node runtime yet");
  return { definitions: [], has: () => false, execute: async () => ({ status: "error", error: { category: "unknown_tool", explanation: "no connectors" } }) };
}
