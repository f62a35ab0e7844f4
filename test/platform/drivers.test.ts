// The edge adapters take their database drivers as values, so a Worker
// bundles only the ones it imports; DATABASE_DRIVER picks among them. A name
// the adapter was not given is a configuration error naming the import that
// adds it — never a silent fall-back to another driver. No database: the
// drivers here record what they were asked to open.
import { describe, expect, it } from "vitest";
import { ConfigurationError } from "../../src/core/errors.ts";
import { readConfig } from "../../src/platform/env.ts";
import { chooseDriver, openServerlessDatabase } from "../../src/platform/serverless.ts";
import type { Database, DatabaseDriver, DriverConnection } from "../../src/storage/database.ts";
import { neonServerless } from "../../src/storage/drivers/neon-serverless.ts";
import { postgresJs } from "../../src/storage/drivers/postgres-js.ts";

function recording(name: DatabaseDriver["name"]) {
  const opened: DriverConnection[] = [];
  const driver: DatabaseDriver = {
    name,
    open: (connection) => {
      opened.push(connection);
      return { driver: name } as unknown as Database;
    },
  };
  return { driver, opened };
}

describe("serverless drivers as values", () => {
  it("the published drivers carry their DATABASE_DRIVER names", () => {
    expect(postgresJs.name).toBe("postgres-js");
    expect(neonServerless.name).toBe("neon-serverless");
  });

  it("unset DATABASE_DRIVER takes the first driver given; a set one takes the driver of that name", () => {
    const [pg, neon] = [recording("postgres-js").driver, recording("neon-serverless").driver];
    expect(chooseDriver(readConfig({}), [neon])).toBe(neon);
    expect(chooseDriver(readConfig({}), [pg, neon])).toBe(pg);
    expect(chooseDriver(readConfig({ DATABASE_DRIVER: "neon-serverless" }), [pg, neon])).toBe(neon);
    expect(chooseDriver(readConfig({ DATABASE_DRIVER: "postgres-js" }), [neon, pg])).toBe(pg);
  });

  it("a DATABASE_DRIVER the app was not given is a ConfigurationError that names the import", () => {
    const pg = recording("postgres-js");
    const err = (() => {
      try {
        openServerlessDatabase(readConfig({ DATABASE_URL: "postgres://x", DATABASE_DRIVER: "neon-serverless" }), [pg.driver]);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigurationError);
    expect((err as ConfigurationError).message).toContain('import { neonServerless } from "edda-edge/drivers/neon-serverless"');
    expect(pg.opened).toEqual([]);
    expect(() => chooseDriver(readConfig({}), [])).toThrow(ConfigurationError);
    expect(() => readConfig({ DATABASE_DRIVER: "pglite" })).toThrow(/DATABASE_DRIVER must be/);
  });

  it("the chosen driver opens one client with the URL, pool size, statement mode and proxy", () => {
    const neon = recording("neon-serverless");
    const config = readConfig({ DATABASE_URL: "postgres://from-env", NEON_WS_PROXY: "127.0.0.1:9", DATABASE_DRIVER: "neon-serverless" });
    openServerlessDatabase(config, [postgresJs, neon.driver], { connectionString: "postgres://hyperdrive", max: 3, perRequest: true });
    expect(neon.opened).toEqual([{ url: "postgres://hyperdrive", max: 3, perRequest: true, wsProxy: "127.0.0.1:9" }]);
    expect(() => openServerlessDatabase(readConfig({}), [neon.driver])).toThrow(/DATABASE_URL is not set/);
  });
});
