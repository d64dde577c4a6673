import { MuxSubscription, RequestOne } from "@nats-io/nats-core/internal";
import { describe, expect, it, vi } from "vitest";

// patches/@nats-io__nats-core@3.4.0.patch: a request that got its answer is released without cancel(), which
// builds a RequestError (stack trace included) to reject a promise already settled: once per JetStream publish.
describe("the patched nats-core request", () => {
  it("releases an answered request without building the error of a cancellation", async () => {
    const mux = new MuxSubscription();
    const request = new RequestOne(mux, "subject", { timeout: 1_000 }, false);
    mux.add(request);
    const cancel = vi.spyOn(request, "cancel");
    const release = vi.spyOn(mux, "cancel");
    const answer = { data: new Uint8Array([1]) };
    request.resolver(null, answer as never);
    await expect(request.deferred).resolves.toBe(answer);
    expect(cancel).not.toHaveBeenCalled();
    expect(release).toHaveBeenCalledWith(request);
    expect(mux.get(request.token)).toBeUndefined();
  });

  it("still rejects a request that fails, with the failure", async () => {
    const mux = new MuxSubscription();
    const request = new RequestOne(mux, "subject", { timeout: 1_000 }, false);
    mux.add(request);
    request.resolver(new Error("no responders"), {} as never);
    await expect(request.deferred).rejects.toThrow("no responders");
    expect(mux.get(request.token)).toBeUndefined();
  });
});
