/**
 * The tools of an existing AI SDK app, written as the AI SDK and LangChain documentation writes
 * them; nothing here knows about sessionlog. `worker.ts` hands them to a sessionlog worker
 * unchanged, where they run inside durable sessions.
 */
import { tool as langChainTool } from '@langchain/core/tools';
import { jsonSchema, tool } from 'ai';
import { z } from 'zod';

const FORECASTS: Record<string, { celsius: number; conditions: string }> = {
  oslo: { celsius: 4, conditions: 'light snow' },
  lisbon: { celsius: 19, conditions: 'sunny' },
  tokyo: { celsius: 12, conditions: 'cloudy' },
};

/** The app's AI SDK tool set, as `streamText({ tools })` takes it: keyed by tool name. */
export const tools = {
  getWeather: tool({
    description: 'Get the current weather in a city',
    inputSchema: z.object({
      city: z.string().describe('The city, e.g. Oslo'),
      unit: z.enum(['celsius', 'fahrenheit']).default('celsius'),
    }),
    execute: async ({ city, unit }, { toolCallId }) => {
      const forecast = FORECASTS[city.toLowerCase()] ?? { celsius: 15, conditions: 'unknown' };
      const temperature = unit === 'celsius' ? forecast.celsius : (forecast.celsius * 9) / 5 + 32;
      return { city, unit, temperature, conditions: forecast.conditions, toolCallId };
    },
  }),
  packingList: tool({
    description: 'A packing list for a trip of some days',
    inputSchema: jsonSchema<{ days: number; cold?: boolean }>({
      type: 'object',
      properties: { days: { type: 'integer', minimum: 1, maximum: 30 }, cold: { type: 'boolean' } },
      required: ['days'],
      additionalProperties: false,
    }),
    execute: async ({ days, cold }) =>
      [`${days} shirts`, `${Math.ceil(days / 3)} trousers`, ...(cold ? ['a warm coat'] : [])].join(', '),
  }),
};

/** A LangChain tool of the same app (`@langchain/core/tools`). */
export const convertTemperature = langChainTool(
  async ({ celsius }) => `${celsius}°C is ${Math.round(((celsius * 9) / 5 + 32) * 10) / 10}°F`,
  {
    name: 'convert_temperature',
    description: 'Convert a temperature from Celsius to Fahrenheit',
    schema: z.object({ celsius: z.number().describe('Degrees Celsius') }),
  },
);
