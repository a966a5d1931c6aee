// In the Tool Pod, before any tenant code is imported: everything this process writes to stdout and stderr
// (the runner's own log lines and whatever tenant code prints, console.log included) loses every form of
// every tenant secret the Tool Pod holds, as agent_runtime/redaction.py's redact_std_streams does.
import type { Redactor } from "./redaction.js";

type Write = typeof process.stdout.write;

function redacting(stream: NodeJS.WriteStream, redactor: Redactor): void {
  const original = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
  const write = (chunk: unknown, ...rest: unknown[]): boolean => {
    // Text and bytes alike: a secret printed as a Buffer is text on the terminal too.
    const text = typeof chunk === "string" ? chunk : chunk instanceof Uint8Array ? Buffer.from(chunk).toString("utf8") : null;
    if (text === null) return original(chunk, ...rest);
    // Written back as UTF-8 text, so an encoding argument no longer applies; a callback still does.
    const callback = rest.find((item) => typeof item === "function");
    return original(redactor.text(text), ...(callback !== undefined ? [callback] : []));
  };
  stream.write = write as Write;
}

let installed = false;

/** Idempotent: the first redactor installed stays (the launcher installs it once, before tenant code). */
export function redactStdStreams(redactor: Redactor): void {
  if (installed || redactor.empty) return;
  installed = true;
  redacting(process.stdout, redactor);
  redacting(process.stderr, redactor);
}
