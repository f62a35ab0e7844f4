// Types for the values test/global-setup.ts hands to tests via provide/inject.
import "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    /** Admin url of the run's Postgres server (database `postgres`). */
    TEST_DATABASE_URL: string;
    /** Port of the local Neon WebSocket→TCP proxy on 127.0.0.1. */
    TEST_NEON_PROXY_PORT: number;
  }
}
