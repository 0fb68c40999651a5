/** The fabricated test models: `models.ts`. */
export * from "./models.js";
