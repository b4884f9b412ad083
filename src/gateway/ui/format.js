// Small formatting helpers shared by the inspector's views.
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);

const integer = new Intl.NumberFormat('en-US');

export function formatNumber(value) {
  return value === null || value === undefined ? '–' : integer.format(value);
}

/** A budget `{value, approximate}` as text: an estimate is rounded to 3 significant digits and marked ≈. */
export function formatBudget(budget) {
  if (!budget) return '–';
  if (!budget.approximate) return formatNumber(budget.value);
  const magnitude = 10 ** Math.max(0, Math.floor(Math.log10(budget.value)) - 2);
  return `≈ ${formatNumber(Math.round(budget.value / magnitude) * magnitude)}`;
}

export function formatTime(ms) {
  return ms === null || ms === undefined ? '–' : new Date(ms).toLocaleString();
}

/** "12 s ago", "3 min ago", … against `now`. */
export function formatAgo(ms, now = Date.now()) {
  if (ms === null || ms === undefined) return '–';
  const seconds = Math.max(0, Math.round((now - ms) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `${hours} h ago`;
  return `${Math.round(hours / 24)} d ago`;
}

export function formatDuration(ms) {
  if (ms === null || ms === undefined) return '';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export function formatPercent(ratio) {
  return ratio === null || ratio === undefined ? '–' : `${Math.round(ratio * 100)}%`;
}

export function clip(text, chars) {
  if (text.length <= chars) return text;
  return `${text.slice(0, chars)}…`;
}

/** "[image image/png 64×48]", "[file report.pdf application/pdf]", "[image https://…]": a medium in one line. */
export function mediaLabel(block) {
  const source = block.source ?? {};
  if (source.kind === 'url') return `[image ${source.url}]`;
  const size = source.width && source.height ? ` ${source.width}×${source.height}` : '';
  const name = block.type === 'file' && block.filename ? ` ${block.filename}` : '';
  return `[${block.type}${name} ${source.mediaType ?? ''}${size}]`;
}

/** The text of a message's content blocks (tool results: their inner text). */
export function messageText(message) {
  const parts = [];
  for (const block of message?.content ?? []) {
    if (block.type === 'text') parts.push(block.text);
    else if (block.type === 'tool-call') parts.push(`→ ${block.name}(${block.arguments})`);
    else if (block.type === 'tool-result')
      parts.push(
        (block.content ?? [])
          .map((b) => (b.type === 'text' ? b.text : b.type === 'image' || b.type === 'file' ? mediaLabel(b) : ''))
          .join(''),
      );
    else if (block.type === 'image' || block.type === 'file') parts.push(mediaLabel(block));
  }
  return parts.join('\n');
}

/** One line describing an event for the log panel. */
export function describeEvent(event) {
  const data = event.data ?? {};
  switch (event.type) {
    case 'turn/start':
      return `turn ${data.turn}`;
    case 'turn/end':
      return `turn ${data.turn}: ${data.reason?.kind ?? ''}${data.reason?.error ? ` (${data.reason.error.code})` : ''}`;
    case 'step/start':
    case 'step/end':
      return `turn ${data.turn} step ${data.step}`;
    case 'user/message':
      return messageText(data);
    case 'assistant/message':
      return messageText(data.message) || (data.interrupted ? '(interrupted)' : '(no content)');
    case 'tool/call':
      return `${data.name}(${data.arguments})`;
    case 'tool/result':
      return messageText(data.message);
    case 'request/header':
      return `${data.header?.model ?? ''} (${data.reason})`;
    case 'llm/retry':
      return `attempt ${data.attempt} in ${formatDuration(data.delayMs)}: ${data.failure?.code}`;
    case 'compaction/start':
      return `${data.trigger}${data.turn === null ? '' : ` in turn ${data.turn}`}`;
    case 'compaction/summary':
      return messageText({ content: data.summary });
    case 'compaction/end':
      return data.error ? `failed: ${data.error}` : 'done';
    case 'compaction/prune':
      return `#${data.shadowedSeqs?.[0]} (${formatNumber(data.shadowedTokenCount)} tokens)`;
    case 'session/run':
      return data.runId ?? '';
    case 'tool/approval-request':
      return `${data.tool ?? ''} ${data.callId ?? ''}`;
    case 'tool/approval':
      return `${data.decision ?? ''} ${data.callId ?? ''}`;
    default:
      return '';
  }
}

/** The key of a turn's step in the folded views. */
export const stepKey = (turn, step) => `${turn}/${step}`;
