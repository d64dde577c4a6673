import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const helper = fileURLToPath(new URL("../dist/interrupts.js", import.meta.url));

// A command that starts a child process (as a stack starts its services), registers it, and waits forever.
const command = `
import { spawn } from "node:child_process";
import { stopOnInterrupt } from ${JSON.stringify(helper)};
const child = spawn("sleep", ["600"], { stdio: "ignore" });
const exited = new Promise((resolve) => child.once("exit", resolve));
stopOnInterrupt({ stop: async () => { child.kill("SIGTERM"); await exited; } });
stopOnInterrupt({ stop: async () => { throw new Error("a stop that fails does not keep the others from stopping"); } });
console.log(String(child.pid));
setInterval(() => {}, 1_000);
`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function interrupt(signal: NodeJS.Signals): Promise<{ code: number | null; child: number }> {
  const proc = spawn(process.execPath, ["--input-type=module", "-e", command], { stdio: ["ignore", "pipe", "pipe"] });
  const child = await new Promise<number>((resolve, reject) => {
    proc.stdout.once("data", (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
    proc.once("exit", (code) => reject(new Error(`exited ${code} before starting its child`)));
  });
  expect(alive(child)).toBe(true);
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  proc.kill(signal);
  return { code: await exited, child };
}

describe("stopOnInterrupt", () => {
  it("stops what the command registered before it exits, on SIGTERM (143) and SIGINT (130)", async () => {
    const term = await interrupt("SIGTERM");
    expect(term.code).toBe(143);
    expect(alive(term.child)).toBe(false);
    const int = await interrupt("SIGINT");
    expect(int.code).toBe(130);
    expect(alive(int.child)).toBe(false);
  });
});
