/**
 * The official `openai` SDK, newest 7.x (the `openai-v7` alias), against /openai/v1. The
 * requests it sends and the scenarios are in openai-sdk.scenarios.ts; every scenario applies.
 */
import OpenAI from 'openai-v7';
import { zodResponseFormat, zodTextFormat } from 'openai-v7/helpers/zod';
import { describeOpenAISdk } from './openai-sdk.scenarios.js';

describeOpenAISdk('openai-v7', OpenAI, { zodResponseFormat, zodTextFormat });
