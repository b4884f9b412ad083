/** The model provider layer (DESIGN §7). */
export * from './catalogue.js';
export * from './deepseek-tokens.js';
export * from './errors.js';
export * from './fake-server.js';
export * from './provider.js';
export * from './request.js';
export * from './stream.js';
export * from './tool-arguments.js';
