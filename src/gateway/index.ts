export {
  createGateway,
  listRegisteredRoutes,
  openEventStreamCount,
  resolveGatewayOptions,
  startGateway,
  GATEWAY_API_VERSION,
} from './server.js';
export type {
  GatewayOptions,
  RegisteredRoute,
  ResolvedGatewayOptions,
  RunningGateway,
  StartGatewayOptions,
} from './server.js';
export { ERROR_STATUS, GatewayError, toErrorResponse } from './errors.js';
export type { ErrorBody, ErrorCode, GatewayErrorCode } from './errors.js';
export { NATIVE_ROUTES, NATIVE_TABLE } from './native/index.js';
export { OPENAI_ROUTES, OPENAI_TABLE } from './openai/index.js';
export { buildOpenApiDocument, registerRouteTable } from './route-table.js';
export type { RouteSpec, RouteTable } from './route-table.js';
