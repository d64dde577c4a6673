import { jetstreamManager } from "@nats-io/jetstream";
import { subjectCatalogue, type SubjectCatalogue } from "@toolgate/contracts";
import { createLogger } from "@toolgate/telemetry";
import { testInfra, uniqueName } from "@toolgate/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { ClaimLedger } from "./claim-ledger.js";
import { NatsEventBus, PublishError } from "./nats-event-bus.js";

const logger = createLogger({ service: "test", level: "silent" });
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A bus on its own connection, as a process would have it. */
function connectBus(subjects: SubjectCatalogue, name: string): Promise<NatsEventBus> {
  return NatsEventBus.connect({
    servers: testInfra().natsUrl,
    name,
    subjects,
    maxEventBytes: 8 * 1024,
    stream: { replicas: 1, maxAgeMs: 60_000, duplicateWindowMs: 60_000 },
    logger,
  });
}

/** Several processes' worth of ledger: each on its own connection, as replicas would be. */
async function ledgers(count: number): Promise<{ ledgers: ClaimLedger[]; buses: NatsEventBus[]; stream: string }> {
  const subjects = subjectCatalogue(uniqueName("t"));
  const stream = `${subjects.stream}_CLAIMS`;
  const opened: ClaimLedger[] = [];
  const buses: NatsEventBus[] = [];
  for (let i = 0; i < count; i++) {
    const bus = await connectBus(subjects, `ledger-test-${i}`);
    cleanups.push(() => bus.close());
    buses.push(bus);
    opened.push(await ClaimLedger.open(bus, { stream, subjectPrefix: `${subjects.prefix}.claims`, replicas: 1, maxValueBytes: 1_024 }));
    if (i === 0) {
      const jsm = await jetstreamManager(bus.connection);
      cleanups.push(async () => {
        await jsm.streams.delete(stream).catch(() => undefined);
        await jsm.streams.delete(subjects.stream);
      });
    }
  }
  return { ledgers: opened, buses, stream };
}

describe("ClaimLedger", () => {
  it("lets exactly one of many concurrent claims of a key stand, on any connection, and hands the others its value", async () => {
    const {
      ledgers: [a, b],
    } = await ledgers(2);
    const claims = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? a! : b!).claim(["run_1", "k"], encoder.encode(`value ${i}`), `claim-${i}`)),
    );
    const winners = claims.flatMap((c, i) => (c.kind === "claimed" ? [i] : []));
    expect(winners).toHaveLength(1);
    for (const c of claims) {
      if (c.kind !== "existing") continue;
      expect(decoder.decode(c.value)).toBe(`value ${winners[0]}`);
      expect(c.claimId).toBe(`claim-${winners[0]}`);
    }
    // Other keys are claims of their own.
    expect(await a!.claim(["run_1", "other"], encoder.encode("x"), "claim-x")).toEqual({ kind: "claimed" });
    expect(await b!.claim(["run_2", "k"], encoder.encode("y"), "claim-y")).toEqual({ kind: "claimed" });
  });

  it("recognises its own claim published again (a retry after a lost PubAck), from any connection", async () => {
    const {
      ledgers: [a, b],
    } = await ledgers(2);
    expect(await a!.claim(["run_1", "k"], encoder.encode("mine"), "claim-1")).toEqual({ kind: "claimed" });
    // Within the duplicate window JetStream drops it; the claim still stands as this one's.
    expect(await a!.claim(["run_1", "k"], encoder.encode("mine"), "claim-1")).toEqual({ kind: "claimed" });
    expect(await b!.claim(["run_1", "k"], encoder.encode("mine"), "claim-1")).toEqual({ kind: "claimed" });
    expect(await b!.claim(["run_1", "k"], encoder.encode("theirs"), "claim-2")).toMatchObject({ kind: "existing", claimId: "claim-1" });
  });

  it("keeps claims across connections and restarts of the client: a new process finds them", async () => {
    const subjects = subjectCatalogue(uniqueName("t"));
    const stream = `${subjects.stream}_CLAIMS`;
    const open = async () => {
      const bus = await connectBus(subjects, "ledger-test");
      return { bus, ledger: await ClaimLedger.open(bus, { stream, subjectPrefix: `${subjects.prefix}.claims`, replicas: 1, maxValueBytes: 1_024 }) };
    };
    const first = await open();
    const since = first.ledger.since;
    expect(await first.ledger.claim(["run_1", "k"], encoder.encode("first"), "claim-1")).toEqual({ kind: "claimed" });
    await first.bus.close();
    const second = await open();
    cleanups.push(async () => {
      const jsm = await jetstreamManager(second.bus.connection);
      await jsm.streams.delete(stream);
      await jsm.streams.delete(subjects.stream);
      await second.bus.close();
    });
    // The stream was there already: its creation time is the first process's.
    expect(second.ledger.since).toEqual(since);
    const again = await second.ledger.claim(["run_1", "k"], encoder.encode("second"), "claim-2");
    expect(again.kind === "existing" && decoder.decode(again.value)).toBe("first");
  });

  it("refuses keys that are not subject-safe and values above the limit, storing nothing", async () => {
    const {
      ledgers: [a],
    } = await ledgers(1);
    await expect(a!.claim(["run_1", "a.b"], encoder.encode("x"), "c1")).rejects.toThrow(TypeError);
    await expect(a!.claim(["run_1", ">"], encoder.encode("x"), "c2")).rejects.toThrow(TypeError);
    await expect(a!.claim([], encoder.encode("x"), "c3")).rejects.toThrow(TypeError);
    await expect(a!.claim(["run_1", "k"], new Uint8Array(1_025), "c4")).rejects.toThrow(RangeError);
    // Nothing of the above was stored: the key is still free.
    expect(await a!.claim(["run_1", "k"], encoder.encode("x"), "c5")).toEqual({ kind: "claimed" });
  });

  it("reports a claim it cannot make as a retryable PublishError", async () => {
    const {
      ledgers: [a],
      buses: [bus],
      stream,
    } = await ledgers(1);
    // The stream is gone (an operator deleted it): nothing can be claimed, and the caller is told to retry.
    await (await jetstreamManager(bus!.connection)).streams.delete(stream);
    const failure = await a!.claim(["run_1", "k"], encoder.encode("x"), "c1").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(PublishError);
    expect(failure).toMatchObject({ code: "PUBLISH_FAILED", retryable: true });
  });
});
