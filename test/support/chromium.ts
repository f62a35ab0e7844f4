// The Chromium the browser tests drive with playwright-core: the system's /usr/bin/chromium
// when present, else the headless build npm installed with the @sparticuz/chromium
// devDependency (never a download). That package ships Brotli-packed files: the binary, the
// NSS/expat libraries it links (al2023.tar.br, built for Amazon Linux but plain ELF) and
// SwiftShader; they are unpacked once per version into node_modules/.cache, into a temporary
// dir renamed into place, so test files starting in parallel never run a half-written binary.
import { execFile } from "node:child_process";
import { createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import { createBrotliDecompress } from "node:zlib";

const SYSTEM_CHROMIUM = "/usr/bin/chromium";

export interface ChromiumLaunch {
  executablePath: string;
  /** The browser's environment (playwright's `env`): the unpacked libraries on LD_LIBRARY_PATH. */
  env?: Record<string, string>;
}

let unpacked: Promise<ChromiumLaunch> | undefined;

/** What to hand `chromium.launch*` so it starts a real browser on this machine. */
export function chromiumLaunch(): Promise<ChromiumLaunch> {
  if (existsSync(SYSTEM_CHROMIUM)) return Promise.resolve({ executablePath: SYSTEM_CHROMIUM });
  unpacked ??= unpackNpmChromium();
  return unpacked;
}

async function unpackNpmChromium(): Promise<ChromiumLaunch> {
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve("@sparticuz/chromium");
  } catch (err) {
    throw new Error(`No Chromium: ${SYSTEM_CHROMIUM} is missing and @sparticuz/chromium is not installed (npm ci installs it)`, { cause: err });
  }
  const root = join(dirname(entry), "..", "..");
  const { version } = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
  const dir = join(root, "..", "..", ".cache", `edda-chromium-${version}`);
  const launch = {
    executablePath: join(dir, "chromium"),
    env: { ...stringEnv(), LD_LIBRARY_PATH: [join(dir, "lib"), dir, process.env.LD_LIBRARY_PATH].filter(Boolean).join(":") },
  };
  if (existsSync(launch.executablePath)) return launch;

  const partial = `${dir}.${process.pid}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  const bin = join(root, "bin");
  await pipeline(createReadStream(join(bin, "chromium.br")), createBrotliDecompress(), createWriteStream(join(partial, "chromium"), { mode: 0o755 }));
  await untarBrotli(join(bin, "al2023.tar.br"), partial); // lib/libnss3.so, …
  await untarBrotli(join(bin, "swiftshader.tar.br"), partial); // libGLESv2.so, … beside the binary
  try {
    renameSync(partial, dir);
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    if (!existsSync(launch.executablePath)) throw err; // else another process won the rename
  }
  return launch;
}

/** Brotli-decompresses a tarball into `dest` (through a file: tar may stop reading before EOF) with the system's tar. */
async function untarBrotli(file: string, dest: string): Promise<void> {
  const tarball = join(dest, "unpacking.tar");
  await pipeline(createReadStream(file), createBrotliDecompress(), createWriteStream(tarball));
  await new Promise<void>((resolve, reject) =>
    execFile("tar", ["-xf", tarball, "-C", dest], (err) => (err ? reject(new Error(`unpacking ${file}: ${err.message}`)) : resolve())),
  );
  rmSync(tarball);
}

function stringEnv(): Record<string, string> {
  return Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
}
