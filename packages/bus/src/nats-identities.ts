import { nkeyAuthenticator, nkeys, type Authenticator } from "@nats-io/nats-core";
import { CALL_EVENT_OWNERS, REFUSAL_REPORTERS, RUN_EVENT_OWNERS, type ServiceName } from "@toolgate/contracts";

/**
 * The identities that connect to NATS, each with its own nkey and subject permissions that the server enforces:
 * the four services; `subscriber`, read-only, for the toolgate CLI's tail and for users' own systems that follow
 * tool events; `operator`, for the contract CLIs (publishing contracts, approvals and quarantines).
 */
export const NATS_ROLES = ["orchestrator", "policy", "executor", "audit", "subscriber", "operator"] as const;
export type NatsRole = (typeof NATS_ROLES)[number];

export interface SubjectRights {
  allow: string[];
  deny?: string[];
}
/** A user's permissions as nats-server's `authorization.users[].permissions` takes them. */
export interface NatsPermissions {
  publish: SubjectRights;
  subscribe: SubjectRights;
}

export interface NatsIdentity {
  role: NatsRole;
  /** The user's public nkey (`U…`): what the server's configuration lists. */
  publicKey: string;
  /** The private seed (`SU…`): a secret, handed only to the process of this role. */
  seed: string;
}

/**
 * The durable consumers the services pull their work through. A subscriber may create consumers of its own
 * but may not take messages from, acknowledge for, reconfigure or delete one of these: it would steal or
 * drop a service's work.
 */
const SERVICE_DURABLES = ["orchestrator", "orchestrator_approvals", "policy", "policy-run-stops", "policy-call-cancels", "executor", "executor_ops", "audit"];

/**
 * What the JetStream API lets a service do: manage its streams and consumers, pull, acknowledge. Deleting or
 * purging a stream, or deleting a message from it, is an operator's act, and would erase what audit verifies.
 */
const SERVICE_JS_API: SubjectRights = {
  allow: ["$JS.API.>", "$JS.ACK.>", "$JS.FC.>"],
  deny: ["$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>", "$JS.API.STREAM.MSG.DELETE.>"],
};

/** Reading only: stream and consumer information, messages by sequence, and consumers of its own. */
const READER_JS_API: SubjectRights = {
  allow: [
    "$JS.API.INFO",
    "$JS.API.STREAM.NAMES",
    "$JS.API.STREAM.LIST",
    "$JS.API.STREAM.INFO.*",
    "$JS.API.STREAM.MSG.GET.*",
    "$JS.API.DIRECT.GET.>",
    "$JS.API.CONSUMER.CREATE.>",
    "$JS.API.CONSUMER.DURABLE.CREATE.>",
    "$JS.API.CONSUMER.INFO.>",
    "$JS.API.CONSUMER.NAMES.*",
    "$JS.API.CONSUMER.LIST.*",
    "$JS.API.CONSUMER.MSG.NEXT.>",
    "$JS.API.CONSUMER.DELETE.>",
    "$JS.ACK.>",
    "$JS.FC.>",
  ],
  deny: SERVICE_DURABLES.flatMap((name) => [
    `$JS.API.CONSUMER.CREATE.*.${name}`,
    `$JS.API.CONSUMER.CREATE.*.${name}.>`,
    `$JS.API.CONSUMER.DURABLE.CREATE.*.${name}`,
    `$JS.API.CONSUMER.DELETE.*.${name}`,
    `$JS.API.CONSUMER.MSG.NEXT.*.${name}`,
    `$JS.ACK.*.${name}.>`,
  ]),
};

/**
 * The permissions of `role` under a subject prefix. `prefix` may be `*`: one server shared by several
 * deployments or test stacks, each under its own prefix (a prefix is a single subject token).
 */
export function natsPermissions(role: NatsRole, prefix = "toolgate"): NatsPermissions {
  const owned = (service: ServiceName): string[] => [
    ...Object.entries(CALL_EVENT_OWNERS)
      .filter(([, owner]) => owner === service)
      .map(([type]) => `${prefix}.call.*.${type}`),
    ...Object.entries(RUN_EVENT_OWNERS)
      .filter(([, owner]) => owner === service)
      .map(([type]) => `${prefix}.run.*.${type}`),
    // Each service that acts on events reports the ones it refused as forgeries, in the refused event's chain.
    ...((REFUSAL_REPORTERS as readonly ServiceName[]).includes(service) ? [`${prefix}.call.*.event_refused`, `${prefix}.run.*.event_refused`] : []),
  ];
  const service = (publish: string[]): NatsPermissions => ({
    publish: { allow: [...publish, ...SERVICE_JS_API.allow], deny: SERVICE_JS_API.deny ?? [] },
    subscribe: { allow: [">"] },
  });
  switch (role) {
    case "orchestrator":
      // Host call ids are claimed on the orchestrator's own ledger stream.
      return service([...owned("orchestrator"), `${prefix}.host_calls.>`]);
    case "policy":
      return service(owned("policy"));
    case "executor":
      // The executor publishes the contracts of the tools it links (`<prefix>.contracts.<tool>.<hash>`), not
      // approvals or quarantines, which are deeper subjects.
      return service([...owned("executor"), `${prefix}.contracts.*.*`]);
    case "audit":
      return service([]);
    case "operator":
      // The JetStream API in full (deleting a deployment's streams is the operator's act), but no event.
      return { publish: { allow: [`${prefix}.contracts.>`, ...SERVICE_JS_API.allow] }, subscribe: { allow: [">"] } };
    case "subscriber":
      return {
        publish: { allow: READER_JS_API.allow, deny: READER_JS_API.deny ?? [] },
        subscribe: { allow: [`${prefix}.>`, "_INBOX.>"] },
      };
  }
}

/** A fresh nkey for each role. */
export function generateNatsIdentities(roles: readonly NatsRole[] = NATS_ROLES): NatsIdentity[] {
  return roles.map((role) => {
    const user = nkeys.createUser();
    return { role, publicKey: user.getPublicKey(), seed: new TextDecoder().decode(user.getSeed()) };
  });
}

/**
 * The identities of an existing seeds file (see {@link parseNatsSeeds}), to write the server's configuration
 * again when the permissions change without handing every process new credentials. Throws for a role the file
 * lacks or a seed that is not an nkey user seed.
 */
export function natsIdentitiesFromSeeds(seeds: Partial<Record<NatsRole, string>>, roles: readonly NatsRole[] = NATS_ROLES): NatsIdentity[] {
  return roles.map((role) => {
    const seed = seeds[role];
    if (!seed) throw new Error(`no seed for ${role}`);
    const user = nkeys.fromSeed(new TextEncoder().encode(seed));
    return { role, publicKey: user.getPublicKey(), seed };
  });
}

export interface AuthorizationOptions {
  prefix?: string;
  /**
   * Development servers only: a password-less user with every right that connections without credentials are
   * taken as (`no_auth_user`), for local tools and tests that observe the bus. The services still connect with
   * their own identities and are held to their permissions.
   */
  openToLocalTools?: boolean;
}

/**
 * The `authorization` block (and, for development, `no_auth_user`) of a nats-server configuration that admits
 * `identities` with their roles' permissions. JSON is valid nats-server configuration syntax.
 */
export function natsAuthorizationConfig(identities: readonly NatsIdentity[], options: AuthorizationOptions = {}): string {
  const users: object[] = identities.map(({ role, publicKey }) => ({ nkey: publicKey, permissions: natsPermissions(role, options.prefix) }));
  const lines = [];
  if (options.openToLocalTools) {
    users.push({ user: "local-tools", permissions: { publish: { allow: [">"] }, subscribe: { allow: [">"] } } });
    lines.push(`no_auth_user: "local-tools"`);
  }
  lines.unshift(`authorization: ${JSON.stringify({ users }, null, 2)}`);
  return `${lines.join("\n")}\n`;
}

/** The connection option that authenticates with an nkey seed (`SU…`). */
export function seedAuthenticator(seed: string): Authenticator {
  return nkeyAuthenticator(new TextEncoder().encode(seed.trim()));
}

const SEED_LINE = /^TOOLGATE_NATS_SEED_([A-Z_]+)=(SU[A-Z2-7]{56})$/;

/** The seeds of a `nats-seeds.env` file (`TOOLGATE_NATS_SEED_<ROLE>=SU…` per line), by role. */
export function parseNatsSeeds(text: string): Partial<Record<NatsRole, string>> {
  const seeds: Partial<Record<NatsRole, string>> = {};
  for (const line of text.split("\n")) {
    const match = SEED_LINE.exec(line.trim());
    const role = match?.[1]?.toLowerCase();
    if (match?.[2] && NATS_ROLES.includes(role as NatsRole)) seeds[role as NatsRole] = match[2];
  }
  return seeds;
}
