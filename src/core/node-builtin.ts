/**
 * A Node built-in module when this code runs on Node itself, else null — for
 * the few places where Node has a much cheaper way than the portable one (a
 * synchronous HMAC, a keep-alive HTTP client). `process.getBuiltinModule`
 * (Node ≥ 20.16) loads it synchronously without an import a bundle would have
 * to resolve. Deno, Bun and workerd may expose a `process` too: they get null
 * and keep the portable way.
 */
type Runtime = {
  process?: { release?: { name?: string }; getBuiltinModule?: (id: string) => unknown };
  Deno?: unknown;
  Bun?: unknown;
  navigator?: { userAgent?: string };
};

export function nodeBuiltin<T>(id: `node:${string}`): T | null {
  const g = globalThis as Runtime;
  if (g.Deno !== undefined || g.Bun !== undefined || g.navigator?.userAgent === "Cloudflare-Workers") return null;
  if (g.process?.release?.name !== "node" || typeof g.process.getBuiltinModule !== "function") return null;
  return (g.process.getBuiltinModule(id) as T | undefined) ?? null;
}
