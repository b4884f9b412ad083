/** Output helpers for the CLI: aligned tables for people, JSON for scripts. */
import type { FileBlock, ImageBlock, Message, StoredEvent } from '../session/index.js';

/** Renders rows as an aligned text table with a header line. */
export function table(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [line(headers), ...rows.map(line)].join('\n');
}

export function clip(text: string, max = 80): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

/** A one-line summary of an event for `sessions events`. */
export function describeEvent(event: StoredEvent): string {
  const d = event.data as Record<string, unknown>;
  switch (event.type) {
    case 'user/message':
    case 'assistant/message':
    case 'tool/result': {
      const message = (event.type === 'user/message' ? d : d.message) as Message;
      return clip(messageText(message), 70);
    }
    case 'assistant/chunk': {
      const chunk = d.chunk as { text?: string; argumentsDelta?: string };
      return clip(chunk.text ?? chunk.argumentsDelta ?? '', 70);
    }
    case 'turn/end':
      return `turn ${String(d.turn)} ${(d.reason as { kind: string }).kind}`;
    case 'tool/call':
      return `${String(d.name)}(${clip(String(d.arguments), 50)})`;
    default:
      return clip(JSON.stringify(d), 70);
  }
}

/** A medium as one line: `[image image/png 64x48]`, `[file report.pdf]`, `[image https://…]`. */
function mediaLabel(block: ImageBlock | FileBlock): string {
  const { source } = block;
  if (source.kind === 'url') return `[${block.type} ${source.url}]`;
  const size = source.width !== undefined && source.height !== undefined ? ` ${source.width}x${source.height}` : '';
  const name = block.type === 'file' && block.filename !== undefined ? ` ${block.filename}` : '';
  return `[${block.type} ${source.mediaType}${size}${name}]`;
}

/** The readable text of a message: text blocks, media, tool calls and tool results. */
export function messageText(message: Message): string {
  return message.content
    .map((b) => {
      if (b.type === 'text') return b.text;
      if (b.type === 'reasoning') return `(thinking) ${b.text}`;
      if (b.type === 'tool-call') return `→ ${b.name}(${b.arguments})`;
      if (b.type === 'image' || b.type === 'file') return mediaLabel(b);
      return `← ${b.content.map((c) => (c.type === 'text' ? c.text : c.type === 'image' || c.type === 'file' ? mediaLabel(c) : '')).join('')}`;
    })
    .join('\n');
}
