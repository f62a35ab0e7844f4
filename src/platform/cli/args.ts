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

/** A JSON argument (message data, workflow input); a bare word that is not JSON is taken as a string. */
export function jsonArgument(text: string | undefined): unknown {
  if (text === undefined) return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
