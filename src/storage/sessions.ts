/**
 * Viewer session revocations: logging out of the viewer records the session's
 * id until its own expiry, so a copied cookie stops working server-side. Only
 * ended sessions are stored (a login writes nothing); the sweep deletes a row
 * once its session would have expired anyway.
 */
import { sql } from "drizzle-orm";
import { queryRows, type Executor } from "./database.ts";
import { DB_NOW } from "./rows.ts";

export interface SessionsArea {
  /** Record that session `sessionId` (valid until `expiresAt`) has ended; idempotent. */
  revokeViewerSession(sessionId: string, expiresAt: Date): Promise<void>;
  viewerSessionRevoked(sessionId: string): Promise<boolean>;
  /** Delete revocations whose session has expired anyway (bounded). */
  purgeExpiredSessionRevocations(limit: number): Promise<number>;
}

export function sessionsArea(ex: Executor): SessionsArea {
  return {
    async revokeViewerSession(sessionId, expiresAt) {
      await ex.execute(sql`
        INSERT INTO viewer_session_revocations (session_id, expires_at) VALUES (${sessionId}, ${expiresAt.toISOString()}::timestamptz)
        ON CONFLICT (session_id) DO NOTHING`);
    },

    async viewerSessionRevoked(sessionId) {
      const rows = await queryRows(ex, sql`SELECT 1 AS ok FROM viewer_session_revocations WHERE session_id = ${sessionId}`);
      return rows.length > 0;
    },

    async purgeExpiredSessionRevocations(limit) {
      const rows = await queryRows(
        ex,
        sql`
        WITH old AS (
          SELECT session_id FROM viewer_session_revocations WHERE expires_at < ${DB_NOW}
          ORDER BY expires_at LIMIT ${limit}::int FOR UPDATE SKIP LOCKED
        )
        DELETE FROM viewer_session_revocations r USING old WHERE r.session_id = old.session_id RETURNING 1 AS ok`,
      );
      return rows.length;
    },
  };
}
