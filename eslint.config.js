// ESLint: only the import-cycle check. Prettier owns the layout and tsc the types, so no other rules run here.
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
];
