/**
 * The `edda-edge` command line (Node). One entry, `main(argv, env)`, returning
 * the exit code: 0 success, 1 the operation failed (the database or the app
 * refused it, or could not be reached), 2 bad usage. Every command has
 * `--help`; commands that print a result take `--json` for scripts.
 *
 *   migrate     apply the migrations to DATABASE_URL (run once per release)
 *   dev         serve a workflows module on embedded PGlite, reloading on change
 *   verify-replay  replay in-flight instances against the code about to be deployed
 *   start, instances list|show|cancel|rerun|fork|bulk, why, deployments, upgrade, schedules, send, publish
 *               talk to an app over its HTTP API (--url, else EDDA_URL, else
 *               http://127.0.0.1:8787; --token or EDDA_API_TOKEN)
 */
import { UsageError, type Io } from "./cli/args.ts";
import { remoteCommand, REMOTE_USAGES } from "./cli/remote.ts";

const USAGE = `usage: edda-edge <command> [options]

Commands:
  migrate                    apply the Edda Edge migrations to DATABASE_URL
  dev <module>               serve a workflows module on embedded PGlite, reload on change
  verify-replay <module>     replay in-flight instances in DATABASE_URL against <module>; exit 1 on divergence
  start <workflow> [input]   start a workflow instance on a deployed app
  instances list|show|cancel list, inspect or cancel instances
  instances rerun|fork|bulk  rerun or fork an instance; cancel, resume, rerun or upgrade every instance a filter matches
  why <instance>             why an instance is not moving and what will move it
  deployments                the deployments that started instances, and their unfinished work
  upgrade <instance>         move an instance to the deployment answering, when its history replays there
  schedules list|pause|resume|trigger   list, pause, resume or trigger the app's schedules
  send <instance> <channel> [data]   send a message to one instance
  publish <channel> [data]   publish a message on a channel

Remote commands talk to --url, else EDDA_URL, else http://127.0.0.1:8787 (host:port works too),
with --token or EDDA_API_TOKEN; --json prints the raw result (or the refusal's problem).
Run "edda-edge <command> --help" for a command's options.
Exit codes: 0 success, 1 the operation failed, 2 bad usage.`;

const defaultIo: Io = { out: (s) => console.log(s), err: (s) => console.error(s) };

export async function main(argv: string[], env: Record<string, string | undefined>, io: Io = defaultIo): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case undefined:
      case "help":
      case "--help":
      case "-h":
        io.out(USAGE);
        return command === undefined ? 2 : 0;
      // Loaded by the command that needs them: `--help` and the remote commands
      // (fetch only) never load the engine, a database driver, drizzle or PGlite.
      case "migrate":
        return await (await import("./cli/migrate.ts")).migrateCommand(rest, env, io);
      case "dev":
        return await (await import("./cli/dev.ts")).dev(rest, env, io);
      case "verify-replay":
        return await (await import("./cli/verify-replay.ts")).verifyReplayCommand(rest, env, io);
      default:
        if (command in REMOTE_USAGES) return await remoteCommand(command, rest, env, io);
        throw new UsageError(`unknown command "${command}"`, USAGE);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`edda-edge: ${err.message}\n\n${err.usage}`);
      return 2;
    }
    io.err(`edda-edge: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
}

