/** HTTP pieces both Kiln servers share (scheduler API on /v1, agent API on :7860). */
export { errorResponse, notFound, onError } from "./errors.js";
export { requestId, type RequestIdEnv } from "./request-id.js";
export { listenHttp, uploadTimeoutMs, type HttpListener } from "./listen.js";
export { bearerToken, parseBearer } from "./bearer.js";
export { staticFiles } from "./static.js";
export { readJsonBody } from "./body.js";
export { setResponseHeader, setResponseHeaders } from "./headers.js";
export { sseResponse } from "./event-stream.js";
export { drain } from "./drain.js";
