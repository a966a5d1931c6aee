// The connector bundle the operator writes (AGENTIC_CONNECTOR_BUNDLE_PATH names its index.yaml): an index of
// JSON text (which is YAML) listing one compiled file per connector with its sha256, the bundle's digest the
// sha256 of the index bytes, checked against AGENTIC_CONNECTOR_BUNDLE_DIGEST when set. The same checks as
// connectors/bundle.py: paths stay inside the bundle's directory, a file changed after the build is refused.
import { createHash } from "node:crypto";
import { readFileSync, realpathSync } from "node:fs";
import { dirname, isAbsolute, join, sep } from "node:path";
import { BUNDLE_DIGEST_ENV, BUNDLE_PATH_ENV, type Env } from "./contract.js";

export const BUNDLE_FORMAT = 1;

export class BundleError extends Error {}

export interface BundleEntry {
  readonly name: string;
  readonly file: string;
  readonly sha256: string;
  readonly tools: number;
  readonly type?: string;
}

export interface RuntimeBundle {
  /** The compiled OpenAPI connectors (ToolDefinitions documents), by bundle order. */
  readonly connectors: readonly Record<string, unknown>[];
  /** Built-in connectors' entries: named so a start-up can refuse them (the TS runner does not run them). */
  readonly builtins: readonly BundleEntry[];
  readonly digest: string | null;
}

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new BundleError(`${where}: not the JSON the operator writes (the TS runner reads bundles as JSON); rebuild the bundle`);
  }
}

function containedPath(root: string, relative: string, field: string): string {
  if (!relative || isAbsolute(relative) || relative.startsWith("\\")) {
    throw new BundleError(`${field}: '${relative}' must be a relative path inside ${root}`);
  }
  if (relative.split(/[\\/]/).includes("..")) throw new BundleError(`${field}: '${relative}' contains '..'; paths must stay inside ${root}`);
  let resolved: string;
  try {
    resolved = realpathSync(join(root, relative));
  } catch {
    return join(root, relative); // missing: reported by the read below
  }
  if (resolved !== root && !resolved.startsWith(root + sep)) {
    throw new BundleError(`${field}: '${relative}' resolves outside ${root} (a symlink?); keep it inside`);
  }
  return resolved;
}

export function readBundle(indexPath: string): RuntimeBundle {
  let indexBytes: Buffer;
  try {
    indexBytes = readFileSync(indexPath);
  } catch (error) {
    const code = error instanceof Error && "code" in error ? String(error.code) : "error";
    if (code === "EISDIR") throw new BundleError(`${BUNDLE_PATH_ENV}: '${indexPath}' is a directory; name its index.yaml`);
    throw new BundleError(`${BUNDLE_PATH_ENV}: '${indexPath}' does not exist; point it at the bundle's index.yaml`);
  }
  const index = parseJson(indexBytes.toString("utf8"), "bundle index") as { format_version?: unknown; connectors?: unknown };
  if (typeof index !== "object" || index === null || !Array.isArray(index.connectors)) {
    throw new BundleError("bundle index: field connectors: Field required");
  }
  if ((index.format_version ?? BUNDLE_FORMAT) !== BUNDLE_FORMAT) {
    throw new BundleError(`bundle index: format_version ${String(index.format_version)} is not supported (expected ${BUNDLE_FORMAT}); rebuild the bundle with this version`);
  }
  const root = realpathSync(dirname(indexPath));
  const connectors: Record<string, unknown>[] = [];
  const builtins: BundleEntry[] = [];
  for (const raw of index.connectors as BundleEntry[]) {
    if (typeof raw?.name !== "string" || typeof raw.file !== "string" || typeof raw.sha256 !== "string") {
      throw new BundleError("bundle index: each connector entry needs name, file and sha256");
    }
    const file = containedPath(root, raw.file, `bundle index entry '${raw.name}' file`);
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      throw new BundleError(`bundle index entry '${raw.name}': file '${raw.file}' is missing next to the index`);
    }
    if (createHash("sha256").update(text, "utf8").digest("hex") !== raw.sha256) {
      throw new BundleError(
        `bundle index entry '${raw.name}': file '${raw.file}' does not match the sha256 the index lists; the bundle was changed after it was built: rebuild it`,
      );
    }
    const document = parseJson(text, `bundle file ${raw.file}`) as Record<string, unknown>;
    if (raw.type !== undefined || document["kind"] === "builtin") builtins.push(raw);
    else connectors.push(document);
  }
  return { connectors, builtins, digest: createHash("sha256").update(indexBytes).digest("hex") };
}

/** The bundle AGENTIC_CONNECTOR_BUNDLE_PATH names (checked against its digest), or none. */
export function resolveRuntimeBundle(env: Env): RuntimeBundle {
  const path = (env[BUNDLE_PATH_ENV] ?? "").trim();
  if (!path) return { connectors: [], builtins: [], digest: null };
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(path)) throw new BundleError(`${BUNDLE_PATH_ENV}: a bundle is a mounted file, not a URL; mount it and name its index.yaml`);
  const bundle = readBundle(path);
  const expected = (env[BUNDLE_DIGEST_ENV] ?? "").trim();
  if (expected && expected !== bundle.digest) {
    throw new BundleError(
      `${BUNDLE_PATH_ENV}: the bundle's digest ${bundle.digest?.slice(0, 12) ?? ""} is not the ${expected.slice(0, 12)} that ${BUNDLE_DIGEST_ENV} names; the mounted bundle was replaced after it was rendered: refusing to start`,
    );
  }
  return bundle;
}
