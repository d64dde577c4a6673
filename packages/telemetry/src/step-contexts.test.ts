import { createContextKey, ROOT_CONTEXT } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import { StepContexts, stepKey, SyncContextManager } from "./step-contexts.js";

const name = createContextKey("name");
const named = (value: string) => ROOT_CONTEXT.setValue(name, value);

describe("SyncContextManager", () => {
  it("makes a context active for the call it wraps, nested, and restores the previous one after it, also on a throw", () => {
    const manager = new SyncContextManager();
    const seen: unknown[] = [];
    manager.with(named("outer"), () => {
      seen.push(manager.active().getValue(name));
      expect(() =>
        manager.with(named("inner"), () => {
          seen.push(manager.active().getValue(name));
          throw new Error("boom");
        }),
      ).toThrow("boom");
      seen.push(manager.active().getValue(name));
    });
    expect(seen).toEqual(["outer", "inner", "outer"]);
    expect(manager.active()).toBe(ROOT_CONTEXT);
  });

  it("does not carry a context past an await: what resumes later runs in the root", async () => {
    const manager = new SyncContextManager();
    const after = manager.with(named("step"), async () => {
      await Promise.resolve();
      return manager.active();
    });
    expect(manager.active()).toBe(ROOT_CONTEXT);
    expect(await after).toBe(ROOT_CONTEXT);
  });

  it("binds a function to a context, with its this and arguments", () => {
    const manager = new SyncContextManager();
    const target = {
      base: 1,
      add(this: { base: number }, n: number) {
        return [this.base + n, manager.active().getValue(name)];
      },
    };
    const bound = manager.bind(named("bound"), target.add);
    expect(bound.call(target, 2)).toEqual([3, "bound"]);
    expect(manager.bind(named("x"), 42)).toBe(42);
  });
});

describe("StepContexts", () => {
  it("finds the step of a call while it runs, also after its awaits, and forgets it once it settles", async () => {
    const steps = new StepContexts();
    const key = stepKey("call", "call_1");
    let release!: () => void;
    const running = steps.run(key, named("execute"), async () => {
      await new Promise<void>((resolve) => (release = resolve));
      return steps.get(key)?.getValue(name);
    });
    expect(steps.get(key)?.getValue(name)).toBe("execute");
    expect(steps.get(stepKey("run", "call_1"))).toBeUndefined();
    release();
    expect(await running).toBe("execute");
    expect(steps.get(key)).toBeUndefined();
  });

  it("stacks steps of one key: the latest in force, the earlier one back when it leaves, whichever settles first", async () => {
    const steps = new StepContexts();
    const key = stepKey("run", "run_1");
    let endFirst!: () => void;
    let endSecond!: () => void;
    const first = steps.run(key, named("turn"), () => new Promise<void>((resolve) => (endFirst = resolve)));
    const second = steps.run(key, named("cancel"), () => new Promise<void>((resolve) => (endSecond = resolve)));
    expect(steps.get(key)?.getValue(name)).toBe("cancel");
    endFirst();
    await first;
    expect(steps.get(key)?.getValue(name)).toBe("cancel");
    endSecond();
    await second;
    expect(steps.get(key)).toBeUndefined();
  });

  it("leaves when its step fails, whether it rejects or throws before returning a promise", async () => {
    const steps = new StepContexts();
    const key = stepKey("call", "call_2");
    await expect(steps.run(key, named("a"), () => Promise.reject(new Error("rejected")))).rejects.toThrow("rejected");
    expect(() =>
      steps.run(key, named("b"), () => {
        throw new Error("thrown");
      }),
    ).toThrow("thrown");
    expect(steps.get(key)).toBeUndefined();
  });
});
