/**
 * Credentials for Baton's API: an API key (`x-api-key`), or AWS SigV4 for an API Gateway whose
 * methods use IAM authorization, signed by the AWS SDK for JavaScript v3's signer with its default
 * credential chain. Any object with `headers()` works as `auth`.
 */
import type { SignatureV4 } from "@smithy/signature-v4";
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from "@smithy/types";

export const API_KEY_HEADER = "x-api-key";

/** What an {@link Auth} sees of a request about to be sent. */
export interface AuthRequest {
  method: string;
  url: URL;
  /** The headers already set (lower-case names). */
  headers: Record<string, string>;
  /** The body as sent: JSON text over REST, binary protobuf over Connect. */
  body: string | Uint8Array | undefined;
}

/** Adds credentials to each request (called once per attempt, so signatures stay fresh). */
export interface Auth {
  headers(request: AuthRequest): Promise<Record<string, string>> | Record<string, string>;
  /** Where the credentials came from, named in the message of a 401 or 403. */
  readonly source?: string;
}

/** `x-api-key: <key>` on every request (`baton dev`, API Gateway usage plans). */
export class ApiKeyAuth implements Auth {
  readonly #key: string;
  constructor(
    key: string,
    readonly source = "the apiKey option",
  ) {
    if (!key) throw new TypeError("the API key must not be empty");
    this.#key = key;
  }
  headers(): Record<string, string> {
    return { [API_KEY_HEADER]: this.#key };
  }
  toString(): string {
    return "ApiKeyAuth(***)";
  }
}

export interface AwsSigV4Options {
  /** The API's region (default: `AWS_REGION`, then `AWS_DEFAULT_REGION`). */
  region?: string;
  /** The signing name (default `execute-api`, API Gateway's). */
  service?: string;
  /**
   * Credentials or a provider of them (default: the AWS SDK's default chain, `fromNodeProviderChain`:
   * environment, shared config and SSO, web identity, container and instance roles).
   */
  credentials?: AwsCredentialIdentity | AwsCredentialIdentityProvider;
}

// Only these request headers are signed: a proxy may rewrite hop-by-hop ones.
const SIGNED = new Set(["content-type", API_KEY_HEADER]);

/**
 * AWS Signature Version 4 on every request (`@smithy/signature-v4`). The signer is loaded at the
 * first request, so a worker that signs nothing never pays for loading it (~60 ms of CPU).
 */
export class AwsSigV4Auth implements Auth {
  readonly region: string;
  readonly service: string;
  readonly source: string;
  readonly #credentials: AwsCredentialIdentity | AwsCredentialIdentityProvider;
  #signer: Promise<SignatureV4> | undefined;

  constructor(options: AwsSigV4Options = {}) {
    const region = options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
    if (!region) throw new TypeError("no AWS region: pass region or set AWS_REGION");
    this.region = region;
    this.service = options.service ?? "execute-api";
    this.source = `AWS SigV4 credentials for ${this.service} in ${region}`;
    this.#credentials = options.credentials ?? defaultChain();
  }

  #loadSigner(): Promise<SignatureV4> {
    this.#signer ??= (async () => {
      const [{ SignatureV4 }, { Sha256 }] = await Promise.all([
        import("@smithy/signature-v4"),
        import("@aws-crypto/sha256-js"),
      ]);
      return new SignatureV4({
        service: this.service,
        region: this.region,
        credentials: this.#credentials,
        sha256: Sha256,
        uriEscapePath: true,
      });
    })();
    return this.#signer;
  }

  async headers(request: AuthRequest): Promise<Record<string, string>> {
    const query: Record<string, string | string[]> = {};
    for (const [k, v] of request.url.searchParams) {
      const had = query[k];
      query[k] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
    }
    const headers: Record<string, string> = { host: request.url.host };
    for (const [k, v] of Object.entries(request.headers)) {
      if (SIGNED.has(k.toLowerCase())) headers[k.toLowerCase()] = v;
    }
    const signer = await this.#loadSigner();
    const signed = await signer.sign({
      method: request.method,
      protocol: request.url.protocol,
      hostname: request.url.hostname,
      port: request.url.port ? Number(request.url.port) : undefined,
      path: request.url.pathname,
      query,
      headers,
      body: request.body,
    });
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(signed.headers)) {
      if (k.toLowerCase() !== "host" && !SIGNED.has(k.toLowerCase())) out[k] = v;
    }
    return out;
  }

  toString(): string {
    return `AwsSigV4Auth(region=${this.region}, service=${this.service})`;
  }
}

/** The AWS SDK's default credential chain, loaded on first use. */
function defaultChain(): AwsCredentialIdentityProvider {
  let provider: AwsCredentialIdentityProvider | undefined;
  return async () => {
    if (provider === undefined) {
      const { fromNodeProviderChain } = await import("@aws-sdk/credential-providers");
      provider = fromNodeProviderChain();
    }
    return provider();
  };
}
