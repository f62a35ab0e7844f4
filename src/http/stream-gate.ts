/**
 * A leaf module (no imports): routes.ts and stream.ts both name the gate, and
 * neither may import the other's module for it (an import circle).
 */

/**
 * The cap on open event streams of one app (one process, one Worker isolate):
 * an SSE response holds a connection and a database reader for as long as the
 * client keeps it, so past `max` open ones a new stream is refused with 503
 * and Retry-After (EDDA_MAX_STREAMS, default 256) instead of piling up.
 */
export class StreamGate {
  private open = 0;
  constructor(readonly max = 256) {}
  get count(): number {
    return this.open;
  }
  /** A slot (call the returned function once, when the stream ends), or null when all are taken. */
  take(): (() => void) | null {
    if (this.open >= this.max) return null;
    this.open++;
    let released = false;
    return () => {
      if (!released) this.open--;
      released = true;
    };
  }
}
