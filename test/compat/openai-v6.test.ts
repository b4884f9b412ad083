/**
 * The official `openai` SDK, 6.x (the project's own `openai` dependency), against /openai/v1.
 * The requests it sends and the scenarios are in openai-sdk.scenarios.ts; every scenario
 * applies (6.x and 7.x send the same requests; 7.x only raised the supported Node version).
 */
import OpenAI from 'openai';
import { zodResponseFormat, zodTextFormat } from 'openai/helpers/zod';
import { describeOpenAISdk, type OpenAIClass, type ZodHelpers } from './openai-sdk.scenarios.js';

// The scenarios are typed against 7.x; 6.x has the same client surface for everything they use.
describeOpenAISdk(
  'openai-v6',
  OpenAI as unknown as OpenAIClass,
  {
    zodResponseFormat,
    zodTextFormat,
  } as unknown as ZodHelpers,
);
