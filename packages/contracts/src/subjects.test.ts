import { describe, expect, it } from "vitest";
import { newCallId, newRunId } from "./ids.js";
import { CALL_EVENT_TYPES, RUN_EVENT_TYPES, subjectCatalogue } from "./subjects.js";

describe("subjectCatalogue", () => {
  const subjects = subjectCatalogue("tg-test_1");

  it("builds subjects under its prefix", () => {
    const callId = newCallId();
    const runId = newRunId();
    expect(subjects.call(callId, "proposed")).toBe(`tg-test_1.call.${callId}.proposed`);
    expect(subjects.run(runId, "stopped")).toBe(`tg-test_1.run.${runId}.stopped`);
    expect(subjects.callEvents("authorized")).toBe("tg-test_1.call.*.authorized");
    expect(subjects.runEvents("started")).toBe("tg-test_1.run.*.started");
    expect(subjects.oneCall(callId)).toBe(`tg-test_1.call.${callId}.*`);
    expect(subjects.allCalls).toBe("tg-test_1.call.>");
    expect(subjects.allRuns).toBe("tg-test_1.run.>");
    expect(subjects.stream).toBe("TG_TEST_1_EVENTS");
    expect(subjectCatalogue().call(callId, "completed")).toBe(`toolgate.call.${callId}.completed`);
  });

  it.each(["call.1", "call_*", "call_>", "call 1", " call", "a\tb", "a\nb", "", "x".repeat(65), "call_é"])(
    "refuses the id %j, which could change routing",
    (id) => {
      expect(() => subjects.call(id, "proposed")).toThrow(TypeError);
      expect(() => subjects.run(id, "started")).toThrow(TypeError);
      expect(() => subjects.oneCall(id)).toThrow(TypeError);
    },
  );

  it.each(["", "Toolgate", "1abc", "a.b", "a*", "a>", "a b", "a".repeat(33)])("refuses the prefix %j", (prefix) => {
    expect(() => subjectCatalogue(prefix)).toThrow(TypeError);
  });

  it("parses every subject it builds back into its parts", () => {
    const callId = newCallId();
    const runId = newRunId();
    for (const type of CALL_EVENT_TYPES) expect(subjects.parse(subjects.call(callId, type))).toEqual({ kind: "call", id: callId, type });
    for (const type of RUN_EVENT_TYPES) expect(subjects.parse(subjects.run(runId, type))).toEqual({ kind: "run", id: runId, type });
  });

  it.each(["toolgate.call.call_1.proposed", "tg-test_1.call.call_1", "tg-test_1.call.call_1.proposed.extra", "tg-test_1.job.call_1.proposed", "tg-test_1", ""])(
    "parse returns undefined for a foreign subject %j",
    (subject) => {
      expect(subjects.parse(subject)).toBeUndefined();
    },
  );
});
