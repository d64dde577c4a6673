import { setFlagsFromString } from "node:v8";
import * as cedar from "@cedar-policy/cedar-wasm/nodejs";
import { PolicyLoadError, QuotaRules, type PolicyBundle } from "./policy-bundle.js";

export type CedarEntity = cedar.EntityJson;
export type CedarUid = { type: string; id: string };
export type CedarContext = cedar.Context;

/** One authorization question. */
export interface CedarRequest {
  principal: CedarUid;
  action: "call" | "read" | "write" | "approve";
  resource: CedarUid;
  context: CedarContext;
  entities: CedarEntity[];
}

/** Cedar's answer. `policies` are the ids (`@id`) of the policies that determined it; errors deny (fail closed). */
export interface CedarAnswer {
  allowed: boolean;
  policies: string[];
  errors: string[];
}

// Node 20's V8 (11.3) inlines JS→Wasm calls into optimized code, and deoptimizing such a frame while the Wasm call
// is on the stack (Cedar calls back into JSON.parse/stringify) crashes the process: "Fatal error … unreachable
// code" in Deoptimizer::DoComputeBuiltinContinuation, reproduced by the benchmark within seconds. Turning that
// inlining off before any Cedar call is optimized avoids it, in every process that loads this module.
setFlagsFromString("--no-turbo-inline-js-wasm-calls");

let preparsedSets = 0;

/** Answers remembered per policy set: Cedar is deterministic, so an identical request has the identical answer. */
const MAX_CACHED_ANSWERS = 8_192;

const uidKey = (uid: CedarUid): string => `${uid.type}::${JSON.stringify(uid.id)}`;

function describeErrors(errors: readonly { message: string }[]): string {
  return errors
    .slice(0, 5)
    .map((e) => e.message)
    .join("; ");
}

/**
 * A validated Cedar policy set with its schema, entities and quota rules, parsed once into the Cedar engine.
 * Every policy carries an `@id`, which is what decisions record as their reasons. Deny by default: a request
 * no policy permits is denied, and so is one whose evaluation errs.
 */
export class CedarPolicies {
  readonly version: string;
  readonly quotas: QuotaRules;
  readonly #roles = new Map<string, readonly CedarEntity[]>();
  readonly #setId: string;
  readonly #schemaId: string | undefined;
  readonly #entities: Map<string, CedarEntity>;
  readonly #answers = new Map<string, CedarAnswer>();

  private constructor(version: string, setId: string, schemaId: string | undefined, entities: Map<string, CedarEntity>, quotas: QuotaRules) {
    this.version = version;
    this.#setId = setId;
    this.#schemaId = schemaId;
    this.#entities = entities;
    this.quotas = quotas;
  }

  /**
   * The listed entities a principal with these roles needs for role hierarchies to resolve: each role and its
   * ancestors (only listed ones; a role nobody lists has no parents). Few entities per request keep Cedar fast.
   */
  rolesOf(roles: readonly string[]): readonly CedarEntity[] {
    const key = roles.join("\n");
    let found = this.#roles.get(key);
    if (!found) {
      const seen = new Map<string, CedarEntity>();
      const visit = (uid: CedarUid) => {
        const k = uidKey(uid);
        const entity = seen.has(k) ? undefined : this.#entities.get(k);
        if (!entity) return;
        seen.set(k, entity);
        for (const parent of entity.parents) visit(refOf(parent));
      };
      for (const role of roles) visit({ type: "Role", id: role });
      found = [...seen.values()];
      if (this.#roles.size < 1_024) this.#roles.set(key, found);
    }
    return found;
  }

  /**
   * Validates (strict mode, against the schema) and compiles a bundle. Throws {@link PolicyLoadError} naming the
   * file and the problem; the engine is left as it was. `validateRequests` also checks every request against the
   * schema (tests use it to prove requests are built as the schema says; production skips it for speed: policies
   * are validated at load, and an evaluation error denies).
   */
  static compile(bundle: PolicyBundle, options: { validateRequests?: boolean } = {}): CedarPolicies {
    const schemaCheck = cedar.checkParseSchema(bundle.schema);
    if (schemaCheck.type === "failure") throw new PolicyLoadError(`schema.cedarschema: ${describeErrors(schemaCheck.errors)}`);
    const policies: Record<string, string> = {};
    for (const { file, text } of bundle.policies) {
      const parts = cedar.policySetTextToParts(text);
      if (parts.type === "failure") throw new PolicyLoadError(`${file}: ${describeErrors(parts.errors)}`);
      if (parts.policy_templates.length > 0) throw new PolicyLoadError(`${file}: templates are not supported`);
      for (const policy of parts.policies) {
        const json = cedar.policyToJson(policy);
        if (json.type === "failure") throw new PolicyLoadError(`${file}: ${describeErrors(json.errors)}`);
        const id = json.json.annotations?.id;
        if (!id || !/^[A-Za-z0-9_.:-]{1,128}$/.test(id)) throw new PolicyLoadError(`${file}: every policy needs an @id("…") of letters, digits and _.:-`);
        if (policies[id] !== undefined) throw new PolicyLoadError(`${file}: policy id ${id} is used twice`);
        policies[id] = policy;
      }
    }
    const validation = cedar.validate({ schema: bundle.schema, policies: { staticPolicies: policies }, validationSettings: { mode: "strict" } });
    if (validation.type === "failure") throw new PolicyLoadError(`policies: ${describeErrors(validation.errors)}`);
    if (validation.validationErrors.length > 0) {
      throw new PolicyLoadError(
        `policies do not validate against the schema: ${validation.validationErrors
          .slice(0, 5)
          .map((e) => `${e.policyId}: ${e.error.message}`)
          .join("; ")}`,
      );
    }
    let entityList: CedarEntity[];
    try {
      entityList = JSON.parse(bundle.entities) as CedarEntity[];
    } catch (error) {
      throw new PolicyLoadError(`entities.json is not JSON: ${(error as Error).message}`, { cause: error });
    }
    if (!Array.isArray(entityList)) throw new PolicyLoadError("entities.json must be an array of Cedar entities");
    const entitiesCheck = cedar.checkParseEntities({ entities: entityList, schema: bundle.schema });
    if (entitiesCheck.type === "failure") throw new PolicyLoadError(`entities.json: ${describeErrors(entitiesCheck.errors)}`);
    const entities = new Map<string, CedarEntity>();
    for (const entity of entityList) entities.set(uidKey(uidOf(entity)), entity);
    const quotas = QuotaRules.parse(bundle.quotas);

    const setId = `toolgate-${bundle.version}-${++preparsedSets}`;
    const preparsed = cedar.preparsePolicySet(setId, { staticPolicies: policies });
    if (preparsed.type === "failure") throw new PolicyLoadError(`policies: ${describeErrors(preparsed.errors)}`);
    let schemaId: string | undefined;
    if (options.validateRequests) {
      schemaId = `${setId}-schema`;
      const schema = cedar.preparseSchema(schemaId, bundle.schema);
      if (schema.type === "failure") throw new PolicyLoadError(`schema.cedarschema: ${describeErrors(schema.errors)}`);
    }
    return new CedarPolicies(bundle.version, setId, schemaId, entities, quotas);
  }

  /** A static entity from entities.json, if listed. */
  entity(uid: CedarUid): CedarEntity | undefined {
    return this.#entities.get(uidKey(uid));
  }

  /**
   * Asks Cedar. Never throws: an engine failure or an evaluation error is a denial that says why. The answer to
   * a request identical in every input (principal, entities, resource, context including the time) is reused.
   */
  isAuthorized(request: CedarRequest): CedarAnswer {
    const key = JSON.stringify(request);
    const cached = this.#answers.get(key);
    if (cached) return cached;
    const answer = this.#evaluate(request);
    if (this.#answers.size >= MAX_CACHED_ANSWERS) this.#answers.delete(this.#answers.keys().next().value!);
    this.#answers.set(key, answer);
    return answer;
  }

  #evaluate(request: CedarRequest): CedarAnswer {
    const answer = cedar.statefulIsAuthorized({
      principal: request.principal,
      action: { type: "Action", id: request.action },
      resource: request.resource,
      context: request.context,
      entities: request.entities,
      preparsedPolicySetId: this.#setId,
      ...(this.#schemaId === undefined ? { validateRequest: false } : { preparsedSchemaName: this.#schemaId, validateRequest: true }),
    });
    const errors: string[] = [];
    if (answer.type === "failure") {
      for (const e of answer.errors) errors.push(e.message);
      return { allowed: false, policies: [], errors };
    }
    const { decision, diagnostics } = answer.response;
    for (const e of diagnostics.errors) errors.push(`${e.policyId}: ${e.error.message}`);
    // Cedar reports the determining policies in no particular order; decisions record them sorted.
    return { allowed: decision === "allow" && errors.length === 0, policies: [...diagnostics.reason].sort(), errors };
  }
}

function uidOf(entity: CedarEntity): CedarUid {
  return refOf(entity.uid);
}

function refOf(ref: cedar.EntityUidJson): CedarUid {
  const uid = ref as { __entity?: CedarUid } & Partial<CedarUid>;
  return uid.__entity ?? { type: uid.type!, id: uid.id! };
}
