import { defineConfig } from "vitest/config";

// Three layers (STYLE.md §12): unit tests beside the code, integration tests against the real NATS and
// Mongo-compatible server (`*.int.test.ts`), end-to-end tests that start the services as processes (`test/`).
export default defineConfig({
  test: {
    globalSetup: ["./packages/testkit/dist/global-setup.js"],
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          sequence: { groupOrder: 0 },
          // `test/*.test.ts` (not `.e2e.`): properties that hold across services, checked on their own code.
          include: ["packages/*/src/**/*.test.ts", "services/*/src/**/*.test.ts", "test/**/*.test.ts"],
          exclude: ["**/*.int.test.ts", "**/*.e2e.test.ts", "**/node_modules/**", "**/dist/**"],
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          sequence: { groupOrder: 1 },
          include: ["packages/*/src/**/*.int.test.ts", "services/*/src/**/*.int.test.ts"],
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
      {
        extends: true,
        test: {
          name: "e2e",
          sequence: { groupOrder: 2 },
          include: ["test/**/*.e2e.test.ts"],
          // A failed test prints what the services of its stacks logged at warn level or above; every response
          // of an orchestrator is checked against its OpenAPI document once a file's tests are done.
          setupFiles: ["./packages/testkit/dist/failure-report.js", "./packages/testkit/dist/api-recording.js"],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          // Each e2e file starts its own set of service processes; two cores run two files at once at most.
          maxWorkers: 2,
        },
      },
    ],
  },
});
