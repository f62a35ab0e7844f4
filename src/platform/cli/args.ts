/**
 * What every CLI command shares: option parsing (node:util parseArgs, strict:
 * an unknown option is a usage error), `--help`, and where output goes.
 */
import { parseArgs, type ParseArgsConfig } from "node:util";

export interface Io {
  out(text: string): void;
  err(text: string): void;
}

/** Bad usage: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  override name = "UsageError";
  constructor(
    message: string,
    readonly usage: string,
  ) {
    super(message);
  }
}

type Options = NonNullable<ParseArgsConfig["options"]>;

export interface Parsed {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  /** `--help` was given: the command printed its usage. */
  help: boolean;
}

export function parseCommand(argv: string[], options: Options, usage: string, io: Io): Parsed {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { ...options, help: { type: "boolean", short: "h" } }, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message, usage);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  if (values.help) io.out(usage);
  return { values, positionals: parsed.positionals, help: values.help === true };
}

/**
 * A JSON argument (message data, workflow input). A bare word (a letter or
 * `_` first, then letters, digits and `_ . - : @ /`) is taken as a string, so
 * `send o-1 approval yes` works unquoted; anything else must be JSON: a
 * malformed object is refused with the parse error (a SyntaxError) rather
 * than sent as a string.
 */
export function jsonArgument(text: string | undefined): unknown {
  if (text === undefined) return null;
  if (/^[\p{L}_][\p{L}\p{N}_.\-:@/]*$/u.test(text) && !["true", "false", "null"].includes(text)) return text;
  return JSON.parse(text) as unknown;
}

/** The database flags of `migrate` and `verify-replay`: --database-url, and --url as its deprecated alias. */
export const DATABASE_URL_OPTIONS = { "database-url": { type: "string" }, url: { type: "string" } } as const;

/**
 * --database-url, else the deprecated --url (with a warning: everywhere else
 * --url names the app), else `fallback` (DATABASE_URL).
 */
export function databaseUrl(values: Record<string, unknown>, fallback: string | undefined, io: Io): string | undefined {
  if (typeof values.url === "string") io.err("edda-edge: --url is deprecated here (it names the app in the other commands): use --database-url");
  return (values["database-url"] as string | undefined) ?? (values.url as string | undefined) ?? fallback;
}
