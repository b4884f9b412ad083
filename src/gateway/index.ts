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
export { buildOpenApiDocument } from './openapi.js';
export { ROUTES } from './native/routes.js';
