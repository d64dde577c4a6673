import { beforeEach } from "vitest";
import { Stack } from "./stack.js";

// A setup file for end-to-end tests: when a test fails, what the services of every stack still running logged
// at warn level or above is printed with the failure. A test's own assertion says what went wrong; this says why,
// on a CI machine whose run cannot be repeated.

const SEVERE = new Set(["warn", "error", "fatal"]);
const LINES_PER_PROCESS = 40;

beforeEach(({ onTestFailed }) => {
  onTestFailed(() => {
    for (const stack of Stack.live) {
      for (const proc of stack.processes) {
        const severe = proc.logs().filter((line) => SEVERE.has(String(line.level)));
        if (severe.length === 0) continue;
        const shown = severe.slice(-LINES_PER_PROCESS).map((line) => JSON.stringify(line));
        console.error(`[${stack.name} ${proc.name}] ${severe.length} warnings or errors, the last ${shown.length}:\n${shown.join("\n")}`);
      }
    }
  });
});
