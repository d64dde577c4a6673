import { MuxSubscription, ProtocolHandler, RequestOne } from "@nats-io/nats-core/internal";
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

// The same patch: the outbound buffer is flushed after the event loop's current phase, not after the microtasks of
// the callback that wrote first, so what one turn publishes and acknowledges leaves in one socket write.
describe("the patched nats-core outbound flush", () => {
  it("sends what is written across the microtasks of one turn in one write, once the turn's phase is over", async () => {
    const protocol = new ProtocolHandler({ servers: "127.0.0.1:4222" }, {} as never);
    const send = vi.fn<(frame: Uint8Array) => void>();
    Object.assign(protocol, { transport: { send }, infoReceived: true, connected: true });
    protocol.sendCommand("PUB a 1\r\nx\r\n");
    await Promise.resolve();
    protocol.sendCommand("PUB b 1\r\ny\r\n");
    await Promise.resolve();
    expect(send).not.toHaveBeenCalled();
    await new Promise((resolve) => setImmediate(resolve));
    expect(send).toHaveBeenCalledTimes(1);
    expect(new TextDecoder().decode(send.mock.calls[0]![0])).toBe("PUB a 1\r\nx\r\nPUB b 1\r\ny\r\n");
  });
});
