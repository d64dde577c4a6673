import { nkeyAuthenticator, type Authenticator } from "@nats-io/nats-core";

/**
 * The connection options for the operator's NATS identity (an nkey seed in `NATS_NKEY_SEED`, as `toolgate nats-auth`
 * creates it; none: an anonymous connection, which only a development server admits) and, with `NATS_TLS_CA` (a
 * PEM file of the servers' CA), TLS verified against that CA.
 */
export function operatorIdentity(env: NodeJS.ProcessEnv = process.env): { authenticator?: Authenticator; tls?: { caFile: string } } {
  const seed = env.NATS_NKEY_SEED?.trim();
  const ca = env.NATS_TLS_CA?.trim();
  return {
    ...(seed ? { authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)) } : {}),
    ...(ca ? { tls: { caFile: ca } } : {}),
  };
}
