/** MCP server configurations: validation, storage, the integrations as MCP servers, and the test. */
export { validateMcpConfig, SERVER_TYPES, type McpServerConfig, type ServerType } from "./config.js";
export { McpStore, type StoredMcpServer } from "./store.js";
export { testMcpServer, type McpTestResult } from "./tester.js";
export { createFilesystemServer } from "./filesystem.js";
export { createRestApiServer, endpointUrl } from "./rest-api.js";
export { createWebsocketServer } from "./websocket.js";
export { createPostgresServer } from "./sql.js";
export { createGithubServer } from "./github.js";
export { createSlackServer } from "./slack.js";
export { createMysqlServer } from "./mysql.js";
export { createMongoServer } from "./mongodb.js";
