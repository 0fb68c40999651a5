// ESLint: the import-cycle check, and in the scheduler no response header set with Hono's `c.header`. Prettier owns
// the layout and tsc the types, so no other rules run here.
// The resolver works from the files alone (no type information), which keeps the lint fast; `.js` in an import
// specifier is looked up as the `.ts` file beside it, as NodeNext writes them.
import tseslint from "typescript-eslint";
import { createNodeResolver, importX } from "eslint-plugin-import-x";

export default [
  {
    ignores: ["node_modules/", "dist/", ".cache/", ".gpu/", ".kiln/", ".stryker-tmp/", "test-artifacts/", "native/", "patches/"],
  },
  {
    files: ["**/*.ts", "**/*.js", "**/*.mjs"],
    languageOptions: { parser: tseslint.parser, ecmaVersion: "latest", sourceType: "module" },
    // A `// eslint-disable` comment for a rule that is not on here is no warning.
    linterOptions: { reportUnusedDisableDirectives: "off" },
    plugins: { "import-x": importX },
    settings: {
      "import-x/extensions": [".ts", ".js", ".mjs"],
      "import-x/parsers": { "@typescript-eslint/parser": [".ts"] },
      "import-x/resolver-next": [
        createNodeResolver({
          extensions: [".ts", ".js", ".mjs", ".json", ".node"],
          extensionAlias: { ".js": [".ts", ".js"], ".mjs": [".mts", ".mjs"] },
        }),
      ],
    },
    rules: {
      "import-x/no-cycle": ["error", { ignoreExternal: true }],
    },
  },
  {
    // A streamed answer's head is written to Node's response before Hono would merge the headers of
    // `c.header` (core/http/event-stream.ts): they would be lost, or break the stream once it runs.
    files: ["scheduler/**/*.ts"],
    ignores: ["**/*.test.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector: "CallExpression[callee.type='MemberExpression'][callee.property.name='header'][arguments.length>=2]",
          message: "Set response headers with setResponseHeader (core/http/headers.ts): a streamed answer's head does not carry Hono's c.header.",
        },
      ],
    },
  },
];
