/**
 * The context report (what `GET /v1/sessions/:id/context` and the inspector show) measures
 * against the same limits the worker acts on: a window the provider stated (`model/limit`) caps
 * the budget, the window and the compaction point, as it does in the pressure ladder.
 */
import { describe, expect, it } from 'vitest';
import { createContextReporter } from '../../src/context/report.js';
import { DEFAULT_MODEL_CATALOGUE } from '../../src/model/catalogue.js';
import { Session, SESSION_FORMAT_VERSION, type NewEvent, type StoredEvent } from '../../src/session/index.js';
import { HEADER, T0, headerEvent, lengthMeter, runEvent, user } from './context-fakes.js';

function session(events: NewEvent[]): Session {
  const stored: StoredEvent[] = events.map((e, seq) => ({ ...e, seq, op: `op-${seq}` }) as StoredEvent);
  return Session.fromEvents({ version: SESSION_FORMAT_VERSION, id: 'report', createdAt: T0 }, stored);
}

describe('the context report', () => {
  const report = createContextReporter({
    meter: lengthMeter(),
    catalogue: DEFAULT_MODEL_CATALOGUE,
    defaultModel: 'fake',
  });

  it("uses the catalogue's window when the provider stated none", () => {
    const context = report(session([runEvent(), headerEvent(), user('u1', 'hello')]));
    const window = DEFAULT_MODEL_CATALOGUE.models.fake!.contextWindow;
    expect(context).toMatchObject({ budget: window, contextWindow: window, compactAt: Math.floor(window * 0.8) });
  });

  it('uses the window the provider stated (model/limit) for the budget, the window and the compaction point', () => {
    const limit: NewEvent = {
      type: 'model/limit',
      time: T0,
      data: { model: HEADER.model, contextWindow: 2_500, source: 'provider-message' },
    };
    const context = report(session([runEvent(), headerEvent(), user('u1', 'hello'), limit]));
    expect(context).toMatchObject({ budget: 2_500, contextWindow: 2_500, compactAt: 2_000 });
  });
});
