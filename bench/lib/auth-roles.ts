/**
 * Password roles on the bench's throwaway cluster, so a scenario can measure
 * the start-up a deployed database asks for: `scram-sha-256` (Postgres's
 * default password method, what Hyperdrive and a direct Neon connection
 * negotiate) and `password` (cleartext over the connection — what Neon's
 * proxy asks of its serverless driver over TLS, and what the driver's
 * `pipelineConnect` sends ahead without waiting). The initdb default stays
 * `trust` for every other role.
 *
 * pg_hba.conf is matched first line first, so the roles' lines go on top; the
 * file is edited in place and the server reloaded. Only on the throwaway
 * cluster: a DATABASE_URL server's authentication is not the bench's to change.
 */
import { readFile, writeFile } from "node:fs/promises";
import postgres from "postgres";

export type AuthMethod = "scram-sha-256" | "password";

export interface PasswordRole {
  user: string;
  password: string;
  method: AuthMethod;
  /** `url` with this role's credentials. */
  urlFor(url: string): string;
}

export async function addPasswordRoles(adminUrl: string, methods: AuthMethod[]): Promise<PasswordRole[]> {
  const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    const roles = methods.map((method) => ({ method, user: `bench_${method.replace(/\W/g, "_")}`, password: `pw-${method}` }));
    await sql`SET password_encryption = 'scram-sha-256'`;
    for (const r of roles) {
      // Superuser: the bench's databases and tables belong to `postgres`; the role only changes the start-up.
      await sql.unsafe(`DROP ROLE IF EXISTS ${r.user}`);
      await sql.unsafe(`CREATE ROLE ${r.user} LOGIN SUPERUSER PASSWORD '${r.password}'`);
    }
    const [row] = await sql<{ hba_file: string }[]>`SHOW hba_file`;
    const hba = row!.hba_file;
    const current = await readFile(hba, "utf8");
    const ours = roles.map((r) => `host all ${r.user} 127.0.0.1/32 ${r.method}\n`).join("");
    await writeFile(hba, ours + current.split("\n").filter((l) => !roles.some((r) => l.includes(` ${r.user} `))).join("\n"));
    await sql`SELECT pg_reload_conf()`;
    await new Promise((r) => setTimeout(r, 300)); // the postmaster rereads the file asynchronously
    return roles.map((r) => ({
      ...r,
      urlFor(url: string) {
        const u = new URL(url);
        u.username = r.user;
        u.password = r.password;
        return u.toString();
      },
    }));
  } finally {
    await sql.end({ timeout: 5 });
  }
}
