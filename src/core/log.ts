/**
 * Structured log lines: one JSON object per line with what an operator needs
 * to act — the message, the instance, the error's class and SQLSTATE — and
 * never the error's text. Database errors quote their SQL parameters
 * (activity results, message data) and error messages can quote payloads, so
 * neither is logged unless debugging asks for it (`EDDA_LOG_DEBUG=1` in the
 * process environment, or `setLogDebug(true)`), which adds the full error.
 */
let debug: boolean | undefined;

/** Log errors in full (their messages, SQL and parameters included). */
export function setLogDebug(on: boolean): void {
  debug = on;
}

function debugOn(): boolean {
  if (debug !== undefined) return debug;
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  return env?.EDDA_LOG_DEBUG === "1";
}

/** The class and SQLSTATE of an error and its causes (innermost SQLSTATE). */
export function errorFields(err: unknown): { error_class: string; sqlstate?: string; cause_class?: string } {
  // Some libraries leave `name` as "Error" (drizzle's DrizzleQueryError): the class name says more.
  const name = err instanceof Error ? (err.name === "Error" && err.constructor.name ? err.constructor.name : err.name) : typeof err;
  let sqlstate: string | undefined;
  let cause: string | undefined;
  let e: unknown = err;
  for (let i = 0; i < 5 && typeof e === "object" && e !== null; i++, e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) && !/^E[A-Z]{4}$/.test(code)) sqlstate = code;
    if (i > 0 && e instanceof Error) cause = e.name === "Error" && e.constructor.name ? e.constructor.name : e.name;
  }
  return { error_class: name, ...(sqlstate ? { sqlstate } : {}), ...(cause ? { cause_class: cause } : {}) };
}

/** One JSON line on stderr: `{ level, msg, …fields, error_class, sqlstate }` (plus `error` when debugging). */
export function logError(msg: string, err: unknown, fields: Record<string, string | number | undefined> = {}, level: "error" | "warn" = "error"): void {
  const line: Record<string, unknown> = { level, msg, ...fields, ...errorFields(err) };
  if (debugOn()) line.error = err instanceof Error ? { message: err.message, stack: err.stack, cause: String((err as { cause?: unknown }).cause ?? "") } : String(err);
  (level === "warn" ? console.warn : console.error)(JSON.stringify(line));
}
