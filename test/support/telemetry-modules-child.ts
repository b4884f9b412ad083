/**
 * Starts sessionlog's telemetry with the OTLP endpoint given as argv[2] (none: tracing off) and
 * prints which OpenTelemetry packages besides the API the process then has loaded, as JSON:
 * `{"tracing": boolean, "loaded": ["@opentelemetry/sdk-trace-base", …]}`.
 */
import { createRequire } from 'node:module';
import { startTelemetry } from '../../src/telemetry/index.js';

const telemetry = await startTelemetry(
  {
    serviceName: 'sessionlog-test',
    logLevel: 'silent',
    logFormat: 'json',
    otlpEndpoint: process.argv[2] || undefined,
    captureContent: false,
  },
  { processMetrics: false },
);
const loaded = new Set<string>();
for (const path of Object.keys(createRequire(import.meta.url).cache)) {
  const match = /node_modules\/(@opentelemetry\/[^/]+)\//.exec(path);
  if (match && match[1] !== '@opentelemetry/api') loaded.add(match[1]!);
}
process.stdout.write(`${JSON.stringify({ tracing: telemetry.tracing !== undefined, loaded: [...loaded].sort() })}\n`);
await telemetry.shutdown();
