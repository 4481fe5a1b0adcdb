/**
 * The environment variables the SDK reads and where a local `baton dev` keeps its key and its
 * dispatch queue. Precedence everywhere: an explicit option, then these variables, then defaults.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

export const ENV_URL = "BATON_URL";
export const ENV_API_KEY = "BATON_API_KEY";
export const ENV_DATA_DIR = "BATON_DATA_DIR";
export const ENV_DISPATCH_QUEUE_URL = "BATON_DISPATCH_QUEUE_URL";
export const ENV_SQS_ENDPOINT = "BATON_SQS_ENDPOINT";
export const DEFAULT_URL = "http://127.0.0.1:8080";
/** Relative to the working directory, as `baton dev`'s own default is. */
export const DEFAULT_DATA_DIR = ".baton/data";
export const API_KEY_FILE = "api-key";
export const DISPATCH_QUEUE_FILE = "dispatch-queue.json";

type Env = Record<string, string | undefined>;

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

/** True for a URL on this machine (127.0.0.1, localhost, ::1). */
export function isLoopback(url: string): boolean {
  try {
    return LOOPBACK.has(new URL(url).hostname);
  } catch {
    return false;
  }
}

/** Where `baton dev` keeps its key: `$BATON_DATA_DIR/api-key`, else `.baton/data/api-key`. */
export function localApiKeyPath(env: Env = process.env): string {
  return join(env[ENV_DATA_DIR] || DEFAULT_DATA_DIR, API_KEY_FILE);
}

/** The key found for `url`, and where it came from (for messages on 401/403). */
export interface ApiKeyFound {
  key: string;
  /** `the apiKey option`, `$BATON_API_KEY`, or the key file's path. */
  source: string;
}

/**
 * The API key for `url`: the `explicit` one, else `BATON_API_KEY`, else (for a server on this
 * machine only) the key a local `baton dev` wrote into its data directory. Undefined if none.
 */
export function findApiKey(
  url: string,
  explicit?: string,
  env: Env = process.env,
): ApiKeyFound | undefined {
  if (explicit) return { key: explicit, source: "the apiKey option" };
  const fromEnv = env[ENV_API_KEY];
  if (fromEnv) return { key: fromEnv, source: `$${ENV_API_KEY}` };
  if (!isLoopback(url)) return undefined;
  const path = localApiKeyPath(env);
  try {
    const key = readFileSync(path, "ascii").trim();
    return key ? { key, source: `the key file ${path}` } : undefined;
  } catch {
    return undefined;
  }
}

/** Where the event-driven mode's jobs arrive. */
export interface DispatchQueue {
  queueUrl: string;
  endpoint: string | undefined;
  region: string | undefined;
  /** A `baton dev` queue on this machine (its SQS accepts any credentials). */
  local: boolean;
  /** Where it was found, for messages. */
  source: string;
}

const QUEUE_HOST =
  /^(?:sqs\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?|([a-z0-9-]+)\.queue\.amazonaws\.com)$/;

/**
 * `BATON_DISPATCH_QUEUE_URL` (with `BATON_SQS_ENDPOINT`), else, for a `url` on this machine, the
 * queue a local `baton dev` wrote into `$BATON_DATA_DIR/dispatch-queue.json`; undefined if neither.
 */
export function dispatchQueueFromEnv(
  url: string,
  env: Env = process.env,
): DispatchQueue | undefined {
  const queueUrl = env[ENV_DISPATCH_QUEUE_URL];
  if (queueUrl) {
    const endpoint = env[ENV_SQS_ENDPOINT] || undefined;
    let region = env.AWS_REGION || env.AWS_DEFAULT_REGION || undefined;
    if (!region) {
      try {
        const m = QUEUE_HOST.exec(new URL(queueUrl).hostname);
        region = m ? (m[1] ?? m[2]) : undefined;
      } catch {
        region = undefined;
      }
    }
    const local = endpoint !== undefined && isLoopback(endpoint);
    return { queueUrl, endpoint, region, local, source: `$${ENV_DISPATCH_QUEUE_URL}` };
  }
  if (!isLoopback(url)) return undefined;
  const path = join(env[ENV_DATA_DIR] || DEFAULT_DATA_DIR, DISPATCH_QUEUE_FILE);
  try {
    const kept = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
    if (typeof kept.queueUrl !== "string" || !kept.queueUrl) return undefined;
    const endpoint = typeof kept.endpoint === "string" && kept.endpoint ? kept.endpoint : undefined;
    const region = typeof kept.region === "string" && kept.region ? kept.region : undefined;
    const local = endpoint !== undefined && isLoopback(endpoint);
    return { queueUrl: kept.queueUrl, endpoint, region, local, source: path };
  } catch {
    return undefined;
  }
}
