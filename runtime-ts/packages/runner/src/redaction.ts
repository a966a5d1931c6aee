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
