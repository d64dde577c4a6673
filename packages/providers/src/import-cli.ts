#!/usr/bin/env node
// toolgate-import: a provider's tool list in, draft contract files out (see import-command.ts).
import { runImportCommand } from "./import-command.js";

runImportCommand(process.argv.slice(2), { out: (line) => console.log(line), err: (line) => console.error(line) }).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 2;
  },
);
