import { nkeyAuthenticator, type Authenticator } from "@nats-io/nats-core";

/**
 * The connection option for the operator's NATS identity (an nkey seed in `NATS_NKEY_SEED`, as `toolgate nats-auth`
 * creates it), or none: an anonymous connection, which only a development server admits.
 */
export function operatorIdentity(env: NodeJS.ProcessEnv = process.env): { authenticator?: Authenticator } {
  const seed = env.NATS_NKEY_SEED?.trim();
  return seed ? { authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)) } : {};
}
