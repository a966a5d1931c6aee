// Every form of every Tool Pod secret out of what leaves the Tool Pod (outcomes, explanations, log lines):
// the value, its base64, base64url and URL-encoded forms. Short values are left alone (they would match
// ordinary text), as agent_runtime/redaction.py does below its minimum.
export const REDACTED = "[REDACTED]";
const MIN_SECRET_LENGTH = 6;

export class Redactor {
  private readonly forms: string[];

  constructor(secrets: Iterable<string>) {
    const forms = new Set<string>();
    for (const secret of secrets) {
      if (secret.length < MIN_SECRET_LENGTH) continue;
      const bytes = Buffer.from(secret, "utf8");
      for (const form of [
        secret,
        bytes.toString("base64"),
        bytes.toString("base64").replace(/=+$/, ""),
        bytes.toString("base64url"),
        encodeURIComponent(secret),
        JSON.stringify(secret).slice(1, -1),
      ]) {
        if (form.length >= MIN_SECRET_LENGTH) forms.add(form);
      }
    }
    // Longest first, so a form containing another is replaced whole.
    this.forms = [...forms].sort((a, b) => b.length - a.length);
  }

  get empty(): boolean {
    return this.forms.length === 0;
  }

  /** Where the tail of `text` that may still be the start of a secret begins (text.length: none). */
  unsafeTail(text: string): number {
    let cut = text.length;
    for (const form of this.forms) {
      for (let k = Math.min(form.length - 1, text.length); k > 0; k -= 1) {
        if (text.endsWith(form.slice(0, k))) {
          cut = Math.min(cut, text.length - k);
          break;
        }
      }
    }
    return cut;
  }

  /** [start, end) of every whole occurrence of a secret form in `text`. */
  spans(text: string): [number, number][] {
    const out: [number, number][] = [];
    for (const form of this.forms) {
      for (let at = text.indexOf(form); at >= 0; at = text.indexOf(form, at + 1)) out.push([at, at + form.length]);
    }
    return out;
  }

  text(value: string): string {
    let out = value;
    for (const form of this.forms) if (out.includes(form)) out = out.split(form).join(REDACTED);
    return out;
  }

  /** A JSON value with every string redacted (keys too). */
  value(value: unknown): unknown {
    if (this.forms.length === 0) return value;
    if (typeof value === "string") return this.text(value);
    if (Array.isArray(value)) return value.map((item) => this.value(item));
    if (typeof value === "object" && value !== null) {
      return Object.fromEntries(Object.entries(value).map(([key, item]) => [this.text(key), this.value(item)]));
    }
    return value;
  }
}

/** One text stream's redaction (a model's streamed content, one tool call's arguments): `push` each piece and
 * send what it returns, `flush` at the end. The tail that may still be the start of a secret is held back, so
 * a secret split across pieces is redacted as if the text had come whole (stream_redaction.py). */
export class WindowRedactor {
  private held = "";

  constructor(private readonly redactor: Redactor) {}

  push(piece: string): string {
    if (this.redactor.empty) return piece;
    const text = this.held + piece;
    let cut = this.redactor.unsafeTail(text);
    // A whole occurrence the cut would split stays behind with the tail.
    for (let moved = true; moved; ) {
      moved = false;
      for (const [start, end] of this.redactor.spans(text)) {
        if (start < cut && cut < end) {
          cut = start;
          moved = true;
        }
      }
    }
    this.held = text.slice(cut);
    return cut > 0 ? this.redactor.text(text.slice(0, cut)) : "";
  }

  flush(): string {
    const text = this.held;
    this.held = "";
    return text ? this.redactor.text(text) : "";
  }
}
