/**
 * The one maker of a session header (session/events.ts `newSessionHeader`), used by a client's
 * create, a run taking over a session nobody created, a fork and a salvage: it writes this
 * build's format version and only the fields it is given, in the order stored headers have.
 */
import { describe, expect, it } from 'vitest';
import {
  SESSION_FORMAT_VERSION,
  newSessionHeader,
  planFork,
  planSalvage,
  type SessionHeader,
} from '../../src/session/index.js';

describe('a new session header', () => {
  it('holds the format version, the id and the time, and only the fields given', () => {
    expect(JSON.stringify(newSessionHeader({ id: 's1', createdAt: 5 }))).toBe(
      JSON.stringify({ version: SESSION_FORMAT_VERSION, id: 's1', createdAt: 5 }),
    );
    expect(newSessionHeader({ id: 's1', createdAt: 5, agent: { model: 'fake' } })).toEqual({
      version: SESSION_FORMAT_VERSION,
      id: 's1',
      createdAt: 5,
      agent: { model: 'fake' },
    });
  });

  it('keeps the order stored headers were written in: lineage, salvage, then the agent', () => {
    const header = newSessionHeader({
      agent: { model: 'fake', tools: ['a'] },
      salvagedAt: { firstBadSeq: 3, reason: 'bad' },
      seedLength: 3,
      parentSession: 'p',
      createdAt: 5,
      id: 'c',
    });
    expect(Object.keys(header)).toEqual([
      'version',
      'id',
      'createdAt',
      'parentSession',
      'seedLength',
      'salvagedAt',
      'agent',
    ]);
  });

  it("is the header a fork and a salvage plan, naming the parent and keeping the parent's agent", () => {
    const parent: SessionHeader = newSessionHeader({ id: 'p', createdAt: 1, agent: { model: 'fake' } });
    const fork = planFork({ header: parent, events: [] }, 'c', 7);
    expect(fork.header).toEqual(
      newSessionHeader({ id: 'c', createdAt: 7, parentSession: 'p', seedLength: 0, agent: { model: 'fake' } }),
    );
    const salvage = planSalvage(parent, [], { seq: 0, reason: 'torn' }, 'd', 8);
    expect(salvage.header).toEqual(
      newSessionHeader({
        id: 'd',
        createdAt: 8,
        parentSession: 'p',
        seedLength: 0,
        salvagedAt: { firstBadSeq: 0, reason: 'torn' },
        agent: { model: 'fake' },
      }),
    );
  });
});
