// The tools one component knows: bundle connectors plus the tenant's own, under unique names that can all be
// shown to one model (Decision 10: a name outside ^[A-Za-z0-9_-]{1,64}$ has each '.' shown as '__').
import { ToolDefinitionError, type ToolSpec } from "./app.js";

const MODEL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const READ_ONLY_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS"]);

export interface ConnectorTool {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
  readonly method: string;
}

export interface ConnectorTools {
  readonly name: string;
  readonly tools: readonly ConnectorTool[];
}

export function toModelName(name: string): string {
  if (MODEL_NAME.test(name)) return name;
  const mapped = name.replaceAll(".", "__");
  if (!MODEL_NAME.test(mapped)) {
    throw new ToolDefinitionError(
      `tool name '${name.slice(0, 80)}' cannot be shown to a model: after '.' -> '__' it must be 1-64 letters, digits, '_' or '-'`,
    );
  }
  return mapped;
}

/** Refuse two tools of one name, or two names a model would see as one, naming both owners. */
export function checkUniqueToolNames(connectors: readonly ConnectorTools[], tenantTools: readonly ToolSpec[]): void {
  const owners = new Map<string, string>();
  const models = new Map<string, string>();
  const entries: [string, string][] = [
    ...connectors.flatMap((defs) => defs.tools.map((tool): [string, string] => [tool.name, `connector '${defs.name}'`])),
    ...tenantTools.map((spec): [string, string] => [spec.name, "the tenant app"]),
  ];
  for (const [name, owner] of entries) {
    const previous = owners.get(name);
    if (previous !== undefined) {
      throw new ToolDefinitionError(
        `tool '${name}' is defined by both ${previous} and ${owner}; rename the tenant tool or drop it from one connector's expose.allow`,
      );
    }
    owners.set(name, owner);
    const model = toModelName(name);
    const other = models.get(model);
    if (other !== undefined) throw new ToolDefinitionError(`tools '${other}' and '${name}' would both be shown to a model as '${model}'; rename one of them`);
    models.set(model, name);
  }
}

/** {name, description, inputSchema} for every tool, connectors first. */
export function toolSurface(connectors: readonly ConnectorTools[], tenantTools: readonly ToolSpec[]): Record<string, unknown>[] {
  checkUniqueToolNames(connectors, tenantTools);
  return [
    ...connectors.flatMap((defs) => defs.tools.map((tool) => ({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema }))),
    ...tenantTools.map((spec) => spec.schema()),
  ];
}

/** toolSurface plus is_local, sensitive and model_name per tool, for the OE's routing and policy (B-26). */
export function routedToolSurface(connectors: readonly ConnectorTools[], tenantTools: readonly ToolSpec[]): Record<string, unknown>[] {
  checkUniqueToolNames(connectors, tenantTools);
  const entries = [
    ...connectors.flatMap((defs) =>
      defs.tools.map((tool) => ({
        name: tool.name,
        description: tool.description,
        inputSchema: tool.inputSchema,
        is_local: false,
        sensitive: !READ_ONLY_METHODS.has(tool.method.toUpperCase()),
      })),
    ),
    ...tenantTools.map((spec) => ({ ...spec.schema(), name: spec.name, is_local: spec.isLocal, sensitive: spec.sensitive })),
  ];
  return entries.map((entry) => ({ ...entry, model_name: toModelName(entry.name) }));
}
