#!/usr/bin/env node
// The `kiln` command. The TypeScript sources are compiled to dist/ by `npm install` (prepare) or `npm run build`.
import "../dist/cli/index.js";
