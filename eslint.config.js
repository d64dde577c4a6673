// Type-aware lint for the whole workspace (STYLE.md §11): no floating promises, no import cycles,
// no deep imports into another package's sources.
import js from "@eslint/js";
import importX, { createNodeResolver } from "eslint-plugin-import-x";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/dist/**", "**/node_modules/**", "infra/.state/**", "**/*.js", "**/*.mjs", "**/__fixtures__/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        project: ["./tsconfig.tests.json", "./packages/*/tsconfig.json", "./services/*/tsconfig.json"],
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { "import-x": importX },
    settings: { "import-x/resolver-next": [createNodeResolver()] },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { arguments: false } }],
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_" }],
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true, allowBoolean: true }],
      "import-x/no-cycle": "error",
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            { group: ["@toolgate/*/src/*", "**/packages/*/src/**", "**/services/*/src/**"], message: "import a package's public entry, not its sources" },
          ],
        },
      ],
    },
  },
  {
    // A property that must hold across services (test/*.property.test.ts) is checked on each service's own code.
    files: ["test/*.property.test.ts"],
    rules: { "no-restricted-imports": "off" },
  },
  {
    files: ["**/*.test.ts"],
    rules: {
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/unbound-method": "off",
      "@typescript-eslint/require-await": "off",
    },
  },
);
