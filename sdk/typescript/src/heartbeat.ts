/**
 * Automatic heartbeats: each running job's lease is extended at half of what remains of it. The
 * lease's end comes from the server's `lockExpiresAt`; a server clock far off from ours only makes
 * heartbeats early (never late): the first is due at half the remaining lease, never sooner than
 * MIN_INTERVAL. A heartbeat answered 404/409 means the job is no longer this worker's: `onLost`.
 */
import { BatonApiError, BatonError } from "./errors.js";
import type { Logger } from "./log.js";

export const MIN_INTERVAL = 0.1; // seconds: a floor against a storm when the lease looks expired
const RETRY_SHARE = 0.25; // after a failed heartbeat, try again after this share of what remains

/** Seconds until the next heartbeat of a lease with `remaining` seconds left. */
export function nextHeartbeatIn(remaining: number): number {
  return Math.max(MIN_INTERVAL, remaining / 2);
}

interface Tracked {
  expires: Date;
  timer: NodeJS.Timeout | undefined;
  sending: boolean;
}

export class Heartbeater {
  readonly #jobs = new Map<string, Tracked>();
  #stopped = false;

  constructor(
    private readonly send: (jobId: string) => Promise<Date>,
    private readonly onLost: (jobId: string, error: Error) => void,
    private readonly log: Logger,
  ) {}

  /** Heartbeat `jobId` at half of its lease, which now ends at `expires`. */
  track(jobId: string, expires: Date): void {
    if (this.#stopped) return;
    const had = this.#jobs.get(jobId);
    if (had?.timer) clearTimeout(had.timer);
    const entry: Tracked = { expires, timer: undefined, sending: had?.sending ?? false };
    this.#jobs.set(jobId, entry);
    this.#schedule(jobId, entry, nextHeartbeatIn((expires.getTime() - Date.now()) / 1000));
  }

  untrack(jobId: string): void {
    const had = this.#jobs.get(jobId);
    if (had?.timer) clearTimeout(had.timer);
    this.#jobs.delete(jobId);
  }

  get tracked(): number {
    return this.#jobs.size;
  }

  stop(): void {
    this.#stopped = true;
    for (const id of [...this.#jobs.keys()]) this.untrack(id);
  }

  #schedule(jobId: string, entry: Tracked, seconds: number): void {
    entry.timer = setTimeout(() => void this.#beat(jobId, entry), seconds * 1000);
    entry.timer.unref(); // a heartbeat alone never keeps the process alive
  }

  async #beat(jobId: string, entry: Tracked): Promise<void> {
    entry.timer = undefined;
    entry.sending = true;
    let expires: Date;
    try {
      expires = await this.send(jobId);
    } catch (error) {
      entry.sending = false;
      if (this.#jobs.get(jobId) !== entry) return; // untracked or re-timed meanwhile
      if (error instanceof BatonApiError && !error.transient) {
        this.untrack(jobId);
        this.onLost(jobId, error);
        return;
      }
      const remaining = (entry.expires.getTime() - Date.now()) / 1000;
      const delay = Math.max(MIN_INTERVAL, RETRY_SHARE * remaining);
      this.log.warn("heartbeat failed; retrying", {
        jobId,
        error: error instanceof BatonError ? error.message : String(error),
        retry_in_s: Math.round(delay * 1000) / 1000,
      });
      this.#schedule(jobId, entry, delay);
      return;
    }
    entry.sending = false;
    if (this.#jobs.get(jobId) === entry && entry.timer === undefined) this.track(jobId, expires);
  }
}
