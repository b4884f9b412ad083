/**
 * The fixed heuristic of dsh-spec §7.1 (4 characters per token plus block and role overhead):
 * the baseline the token meter's accuracy is compared with in bench/meter.ts.
 */
import type { ContentBlock, Message, RequestHeader } from '../../src/session/index.js';

const CHARS_PER_TOKEN = 4;
const BLOCK_OVERHEAD = 4;
const ROLE_OVERHEAD = 4;
const chars = (text: string): number => Math.ceil(text.length / CHARS_PER_TOKEN);

function heuristicBlock(block: ContentBlock): number {
  switch (block.type) {
    case 'text':
    case 'reasoning':
      return chars(block.text) + BLOCK_OVERHEAD;
    case 'tool-call':
      return chars(block.name) + chars(block.arguments) + BLOCK_OVERHEAD;
    case 'tool-result':
      return block.content.reduce((sum, inner) => sum + heuristicBlock(inner), 0) + BLOCK_OVERHEAD;
    case 'image':
    case 'file':
      // dsh-spec §7.1: an unknown block (images included) is its JSON length over 4, plus the block overhead.
      return chars(JSON.stringify(block)) + BLOCK_OVERHEAD;
  }
}

export const heuristicPricer = {
  message: (message: Message): number =>
    message.content.reduce((sum, block) => sum + heuristicBlock(block), 0) + ROLE_OVERHEAD,
  header: (header: RequestHeader): { systemTokens: number; toolsTokens: number } => ({
    systemTokens: header.system ? chars(header.system) + ROLE_OVERHEAD : 0,
    toolsTokens: header.tools && header.tools.length > 0 ? chars(JSON.stringify(header.tools)) + ROLE_OVERHEAD : 0,
  }),
};
