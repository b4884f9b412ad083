/**
 * What `sessionlog dev` passes on from scripts/temporal-dev-server while it starts: only the
 * lines saying the `temporal` binary is being obtained (the one slow step, and only when no
 * usable binary is found), so a start with the binary in place says nothing of building it.
 */
import { describe, expect, it } from 'vitest';
import { binaryNotes } from '../../src/cli/dev.js';

describe('binaryNotes', () => {
  it("passes on the script's notes of building or downloading the binary, without its prefix", () => {
    const stderr = [
      'temporal-dev-server: waiting for the build lock /home/u/.cache/sessionlog/bin/.build.lock',
      'temporal-dev-server: building Temporal CLI v1.5.1 with go version go1.25.0 linux/amd64 (a few minutes the first time)',
      'go: downloading github.com/temporalio/cli v1.5.1',
      "temporal-dev-server: trying the TypeScript SDK's download of the Temporal dev server",
    ].join('\n');
    expect(binaryNotes(stderr)).toEqual([
      'waiting for the build lock /home/u/.cache/sessionlog/bin/.build.lock',
      'building Temporal CLI v1.5.1 with go version go1.25.0 linux/amd64 (a few minutes the first time)',
      "trying the TypeScript SDK's download of the Temporal dev server",
    ]);
  });

  it('passes on nothing when the binary is found: the start-up notes and errors stay quiet', () => {
    const stderr = [
      'temporal-dev-server: already running (pid 4242)',
      'temporal-dev-server: another Temporal server already answers at 127.0.0.1:7233; use --port 0 for a free port or stop it',
      'temporal-dev-server: stopped (pid 4242)',
    ].join('\n');
    expect(binaryNotes(stderr)).toEqual([]);
  });
});
