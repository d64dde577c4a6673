/**
 * Policy's resource check, the orchestrator's write lock and the executor's idempotency key all read "the
 * resource these arguments name" from one contract pointer. This property test drives each service's own code
 * path — policy's Cedar request, the orchestrator's call traits, the executor's key — with the same arguments
 * and shows they name the same resource, for pointers that reach prototype keys, escaped tokens, array indices
 * written every which way, and arguments with any JSON values.
 */
import { canonicalJson, newCallId, newRunId, type Decision } from "@toolgate/contracts";
import { ToolRegistry } from "@toolgate/registry";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { callTraits } from "../services/orchestrator/src/call-scheduler.js";
import { authorizeCall } from "../services/policy/src/authorization.js";
import type { CedarPolicies } from "../services/policy/src/cedar-policies.js";
import { ALICE, compiled } from "../services/policy/src/test-fixtures.js";
import { keyFacts } from "../services/executor/src/idempotency-key.js";

const POINTERS = ["/task_id", "/__proto__", "/constructor", "/a~1b", "/~01", "/list/0", "/list/01", "/list/-", "/x/y", "/0"];
const KEYS = ["task_id", "__proto__", "constructor", "a/b", "~1", "list", "x", "0", "y"];

/** The repository's policies plus one that permits everything, so every resource reaches Cedar. */
const permissive = compiled({ "zz-permit-all.cedar": `@id("test.permit_all")\npermit(principal, action, resource);` });

/** Policy's own Cedar requests, as they are made: the Task ids it asks about. */
function recordingPolicies(): { policies: CedarPolicies; tasks: string[] } {
  const tasks: string[] = [];
  const policies = new Proxy(permissive, {
    get(target, property: keyof CedarPolicies) {
      if (property === "isAuthorized") {
        return (request: Parameters<CedarPolicies["isAuthorized"]>[0]) => {
          if (request.resource.type === "Task") tasks.push(request.resource.id);
          return target.isAuthorized(request);
        };
      }
      const value = target[property];
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { policies, tasks };
}

const registries = new Map<string, ToolRegistry>();

function toolFor(pointer: string): ToolRegistry {
  const cached = registries.get(pointer);
  if (cached) return cached;
  const registry = ToolRegistry.from([
    {
      name: "touch_task",
      version: "1.0.0",
      description: "Touches the task its arguments name; used by the interpretation test only.",
      owner: "test",
      input_schema: { type: "object", additionalProperties: true },
      output_schema: { type: "object", additionalProperties: true },
      side_effect: "write",
      risk: "low",
      timeout_ms: 1_000,
      idempotency: { kind: "keyed", key_template: `{args:${pointer}}` },
      resources: [{ type: "task", pointer }],
      limits: { max_argument_bytes: 64 * 1024, max_result_bytes: 1024, max_depth: 16 },
    },
  ]);
  registries.set(pointer, registry);
  return registry;
}

function decisionFor(tool: { name: string; version: string; hash: string }): Decision {
  return {
    decision_id: "d",
    call_id: newCallId(),
    run_id: newRunId(),
    tool,
    args_hash: `sha256:${"b".repeat(64)}`,
    principal: ALICE,
    context: { task_id: "task_c04" },
    policy_version: "p",
    issued_at: new Date().toISOString(),
    expires_at: new Date().toISOString(),
    key_id: "k",
  };
}

/** Argument text with the given keys as own members, however JSON.stringify would treat them. */
const argumentsText = fc
  .uniqueArray(fc.tuple(fc.constantFrom(...KEYS), fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.array(fc.string(), { maxLength: 3 }))), {
    selector: ([key]) => key,
    maxLength: 5,
  })
  .map((members) => `{${members.map(([key, value]) => `${JSON.stringify(key)}:${JSON.stringify(value)}`).join(",")}}`);

describe("one interpretation of a contract's resource pointer", () => {
  it("policy, the write lock and the idempotency key name the same resource from the same arguments", () => {
    fc.assert(
      fc.property(fc.constantFrom(...POINTERS), argumentsText, (pointer, text) => {
        const registry = toolFor(pointer);
        const tool = registry.get("touch_task")!;
        const checked = registry.checkArguments(tool, text);
        fc.pre(checked.ok);
        if (!checked.ok) return;

        const { policies, tasks } = recordingPolicies();
        const authorization = authorizeCall(policies, {
          principal: ALICE,
          tool,
          arguments: checked.arguments,
          context: { task_id: "task_c04" },
          taint: { tainted: false, sources: [] },
          now: new Date(),
        });
        const locks = callTraits(registry, "touch_task", text).resources;
        const segment = tool.idempotencyKey(keyFacts(decisionFor(tool.ref)), checked.arguments).slice("touch_task:".length);
        const keyed = JSON.parse(segment) as unknown;

        if (keyed === null) {
          // The arguments name no task: policy refuses without asking Cedar, and nothing is locked.
          expect(authorization).toMatchObject({ kind: "deny", level: "resource" });
          expect(tasks).toEqual([]);
          expect(locks).toEqual([]);
        } else {
          const id = typeof keyed === "string" ? keyed : canonicalJson(keyed);
          expect(tasks).toEqual([id]);
          expect(locks).toEqual([`task:${id}`]);
        }
      }),
      { numRuns: 400 },
    );
  });
});
