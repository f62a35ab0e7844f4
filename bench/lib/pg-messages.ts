/**
 * Names the Postgres frontend messages in a client→server byte stream, so a
 * round trip counted by the latency proxy can be told apart (start-up,
 * password, Parse/Describe, Bind/Execute, a simple query). Only for reading
 * the bench's figures: it understands framing, not content, beyond the first
 * words of a statement.
 */

export interface FrontendParser {
  /** Feed the next chunk; returns the messages completed in it. */
  push(chunk: Buffer): string[];
}

const SSL_REQUEST = 80877103;
const GSS_REQUEST = 80877104;

export function frontendParser(): FrontendParser {
  let buf: Buffer = Buffer.alloc(0);
  let started = false;
  // Named statements, so a Bind of one prepared earlier on the connection can say which statement it runs.
  const prepared = new Map<string, string>();
  return {
    push(chunk) {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      const out: string[] = [];
      for (;;) {
        if (!started) {
          if (buf.length < 8) break;
          const len = buf.readInt32BE(0);
          if (buf.length < len) break;
          const code = buf.readInt32BE(4);
          // An SSL/GSS request is answered with one byte; the startup message follows it.
          if (code === SSL_REQUEST || code === GSS_REQUEST) out.push("SSLRequest");
          else {
            out.push("Startup");
            started = true;
          }
          buf = buf.subarray(len);
          continue;
        }
        if (buf.length < 5) break;
        const len = buf.readInt32BE(1);
        if (buf.length < 1 + len) break;
        out.push(describe(String.fromCharCode(buf[0]!), buf.subarray(5, 1 + len), prepared));
        buf = buf.subarray(1 + len);
      }
      return out;
    },
  };
}

function firstWords(sql: string): string {
  // A leading comment (the engine's last-statement marker) is not the statement's first words.
  return sql.replace(/^\s*\/\*.*?\*\//s, "").replace(/\s+/g, " ").trim().split(" ").slice(0, 3).join(" ");
}

function describe(type: string, body: Buffer, prepared: Map<string, string>): string {
  switch (type) {
    case "Q":
      return `Query(${firstWords(body.toString("utf8", 0, Math.max(0, body.length - 1)))})`;
    case "P": {
      const nameEnd = body.indexOf(0);
      const sqlEnd = body.indexOf(0, nameEnd + 1);
      const words = firstWords(body.toString("utf8", nameEnd + 1, sqlEnd));
      if (nameEnd > 0) prepared.set(body.toString("utf8", 0, nameEnd), words);
      return `Parse(${words})`;
    }
    case "p":
      return "Password";
    case "B": {
      // Portal name, then statement name.
      const portalEnd = body.indexOf(0);
      const name = body.toString("utf8", portalEnd + 1, body.indexOf(0, portalEnd + 1));
      const words = name ? prepared.get(name) : undefined;
      return words ? `Bind(${words})` : "Bind";
    }
    case "E":
      return "Execute";
    case "D":
      return "Describe";
    case "S":
      return "Sync";
    case "H":
      return "Flush";
    case "C":
      return "Close";
    case "X":
      return "Terminate";
    default:
      return type;
  }
}

/**
 * The same for Postgres carried in a WebSocket (Neon's driver through its
 * proxy): the HTTP upgrade request, then the client's (masked) frames, whose
 * payloads are the Postgres byte stream.
 */
export function websocketFrontendParser(): FrontendParser {
  const pg = frontendParser();
  let buf: Buffer = Buffer.alloc(0);
  let upgraded = false;
  return {
    push(chunk) {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      const out: string[] = [];
      if (!upgraded) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return out;
        out.push("WebSocketUpgrade");
        upgraded = true;
        buf = buf.subarray(end + 4);
      }
      for (;;) {
        if (buf.length < 2) break;
        const opcode = buf[0]! & 0x0f;
        const masked = (buf[1]! & 0x80) !== 0;
        let len = buf[1]! & 0x7f;
        let at = 2;
        if (len === 126) {
          if (buf.length < 4) break;
          len = buf.readUInt16BE(2);
          at = 4;
        } else if (len === 127) {
          if (buf.length < 10) break;
          len = Number(buf.readBigUInt64BE(2));
          at = 10;
        }
        const maskAt = at;
        if (masked) at += 4;
        if (buf.length < at + len) break;
        const payload = Buffer.from(buf.subarray(at, at + len));
        if (masked) for (let i = 0; i < payload.length; i++) payload[i]! ^= buf[maskAt + (i % 4)]!;
        buf = buf.subarray(at + len);
        if (opcode === 0x8) out.push("WebSocketClose");
        else if (opcode === 0x0 || opcode === 0x1 || opcode === 0x2) out.push(...pg.push(payload));
      }
      return out;
    },
  };
}
