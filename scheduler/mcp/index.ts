/** MCP server configurations: validation, storage, account secrets, the egress guard, the integrations as MCP servers, and the test. */
export { validateMcpConfig, secretReferences, McpServerConfigBody, SERVER_TYPES, type McpServerConfig, type ServerType } from "./config.js";
export { McpStore, type StoredMcpServer } from "./store.js";
export { McpService, type McpServiceOptions } from "./service.js";
export { AccountSecrets, loadSecretsKey, SecretValueRequest } from "./secrets.js";
export { AnswerTooLargeError, EgressPolicy, EgressDeniedError } from "./egress.js";
export { connectScope, type ConnectContext } from "./context.js";
export { testMcpServer, McpTestRequest, type McpTestResult } from "./tester.js";
export { createFilesystemServer } from "./filesystem.js";
export { createRestApiServer, endpointUrl } from "./rest-api.js";
export { createWebsocketServer } from "./websocket.js";
