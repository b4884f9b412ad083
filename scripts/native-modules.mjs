#!/usr/bin/env node
/**
 * Keeps sessionlog's one ABI-specific native module, better-sqlite3, built for the Node that runs.
 * Every other native dependency needs nothing per version: @temporalio/core-bridge, @swc/core,
 * rolldown and lightningcss are N-API addons prebuilt per platform, esbuild is an executable,
 * tiktoken is WebAssembly.
 *
 * better-sqlite3's addon is tied to one NODE_MODULE_VERSION (Node 20: 115, 22: 127, 24: 137).
 * Its install script fetches a prebuilt binary (internet) or compiles with node-gyp, which needs
 * the headers of the running Node; without internet node-gyp cannot download them, and a
 * `nodedir` in the user's npm config may point at the headers of another Node. So after
 * `npm ci`/`npm install` (postinstall), before the CLI starts (bin/sessionlog.mjs) and before the
 * tests (test/support/global-setup.ts), this checks that the addon loads in this Node and, when
 * it does not (e.g. node_modules was installed under Node 20 and this is Node 24):
 *   1. takes the addon from the per-user cache ~/.cache/sessionlog/native/ when one was built
 *      for this better-sqlite3 version, NODE_MODULE_VERSION, platform and architecture, so
 *      switching between Node versions is a copy, not a rebuild;
 *   2. else compiles it with node-gyp from local headers: npm_config_nodedir, the running Node's
 *      own prefix (official builds ship include/node), or a Node package fetched by
 *      scripts/node-version for this major (the npm registry, never at run time: --offline);
 *      with no local headers and not --offline, node-gyp downloads them (needs the internet).
 * The build runs in a private copy of the package and the addon is renamed into place, so a
 * process that has the old one loaded is not disturbed. A stamp next to node_modules records
 * the addon that loaded for which Node, so the common case costs a few stat calls.
 *
 * Usage: node scripts/native-modules.mjs [ensure] [--offline] [--quiet]
 * Exit status 0 when better-sqlite3 loads in this Node (after a repair if needed), 1 otherwise.
 */
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism, homedir } from 'node:os';
import { basename, delimiter, dirname, join, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const SCRIPTS_DIR = dirname(fileURLToPath(import.meta.url));
const ADDON = 'better_sqlite3.node';
const LOCK_WAIT_MS = 20 * 60_000;

/** Raised with a message that says what to do; the CLI prints it without a stack. */
export class NativeModuleError extends Error {}

/**
 * Makes better-sqlite3 load in the running Node, repairing it as described at the top of this
 * file. `offline` forbids every download (the CLI and the tests run this): without local headers
 * it fails with what to run instead. Throws NativeModuleError when the addon cannot be had.
 */
export function ensureNativeModules({ offline = false, quiet = false } = {}) {
  const note = quiet ? () => {} : (message) => process.stderr.write(`native-modules: ${message}\n`);
  const pkg = locateBetterSqlite3();
  if (stampMatches(pkg)) return;

  const live = tryLoad(pkg.dir, null);
  if (live.ok) {
    saveToCache(pkg, pkg.addon);
    writeStamp(pkg);
    return;
  }
  withLock(join(pkg.stateDir, 'native-modules.lock'), () => {
    if (tryLoad(pkg.dir, null).ok) return; // repaired by another process while this one waited
    note(`better-sqlite3 ${pkg.version} does not load in Node ${process.version}: ${live.reason}`);
    const cached = cacheFile(pkg);
    if (existsSync(cached) && tryLoad(pkg.dir, cached).ok) {
      note(`using the addon built earlier for NODE_MODULE_VERSION ${process.versions.modules} (${cached})`);
      placeAtomically(cached, pkg.addon);
    } else {
      build(pkg, { offline, note });
    }
    const after = tryLoad(pkg.dir, null);
    if (!after.ok) throw new NativeModuleError(`better-sqlite3 still does not load after the repair: ${after.reason}`);
    note(`better-sqlite3 ${pkg.version} is ready for Node ${process.version}`);
  });
  writeStamp(pkg);
}

// --- the package and its state -------------------------------------------------------------

function locateBetterSqlite3() {
  let manifest;
  try {
    manifest = createRequire(join(SCRIPTS_DIR, '..', 'package.json')).resolve('better-sqlite3/package.json');
  } catch {
    throw new NativeModuleError('better-sqlite3 is not installed next to sessionlog; run `npm ci` (or `npm install`)');
  }
  const dir = dirname(manifest);
  const { version } = JSON.parse(readFileSync(manifest, 'utf8'));
  // node_modules/.cache is where tools keep per-install state; it goes when node_modules goes.
  const stateDir = join(dirname(dir), '.cache', 'sessionlog');
  return { dir, version, addon: join(dir, 'build', 'Release', ADDON), stateDir };
}

/** The per-user cache entry for this better-sqlite3 version and this Node's ABI. */
function cacheFile(pkg) {
  process.report.excludeNetwork = true; // the report is read for its libc only
  const libc = process.platform === 'linux' && !process.report.getReport().header.glibcVersionRuntime ? '-musl' : '';
  const key = `better-sqlite3-${pkg.version}-node-v${process.versions.modules}-${process.platform}-${process.arch}${libc}`;
  const root = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(root, 'sessionlog', 'native', key, ADDON);
}

function stampFile(pkg) {
  return join(pkg.stateDir, 'native-modules.json');
}

/** What the stamp says: the addon file (by size and mtime) loaded in the node at execPath. */
function currentStamp(pkg) {
  let stat;
  try {
    stat = statSync(pkg.addon);
  } catch {
    return null; // no addon built yet: nothing to stamp
  }
  return {
    execPath: process.execPath,
    modules: process.versions.modules,
    version: pkg.version,
    size: stat.size,
    mtimeMs: stat.mtimeMs,
  };
}

function stampMatches(pkg) {
  const now = currentStamp(pkg);
  if (!now) return false;
  try {
    const saved = JSON.parse(readFileSync(stampFile(pkg), 'utf8'));
    return Object.entries(now).every(([key, value]) => saved[key] === value);
  } catch {
    return false; // no stamp or an unreadable one: check the slow way
  }
}

function writeStamp(pkg) {
  const stamp = currentStamp(pkg);
  if (!stamp) return;
  try {
    mkdirSync(pkg.stateDir, { recursive: true });
    writeFileSync(stampFile(pkg), `${JSON.stringify(stamp)}\n`);
  } catch {
    // A read-only node_modules (the Docker image) keeps no stamp: the next start checks again.
  }
}

// --- loading --------------------------------------------------------------------------------

/** Opens an in-memory database in a child process of this Node, with the given addon or the default one. */
function tryLoad(packageDir, addonPath) {
  const options = addonPath ? `, { nativeBinding: ${JSON.stringify(addonPath)} }` : '';
  const code = `const Database = require(${JSON.stringify(packageDir)}); const db = new Database(':memory:'${options}); db.prepare('select 1').get(); db.close();`;
  const env = { ...process.env };
  delete env.NODE_OPTIONS; // a loader hook of the caller (vitest, tsx) has no business here
  const result = spawnSync(process.execPath, ['-e', code], { encoding: 'utf8', env });
  if (result.status === 0) return { ok: true };
  const output = `${result.stderr ?? ''}${result.error ? String(result.error) : ''}`;
  const abis = /using\s+NODE_MODULE_VERSION (\d+)\.[\s\S]*?requires\s+NODE_MODULE_VERSION (\d+)/.exec(output);
  if (abis) return { ok: false, reason: `it is built for NODE_MODULE_VERSION ${abis[1]}, this Node needs ${abis[2]}` };
  const lines = output.split('\n');
  const reason =
    lines.find((line) => /^\w*Error\b/.test(line)) ??
    lines.filter(Boolean).slice(-1)[0] ??
    `exit status ${result.status}`;
  return { ok: false, reason: reason.trim() };
}

function placeAtomically(source, target) {
  mkdirSync(dirname(target), { recursive: true });
  const temporary = `${target}.${process.pid}.tmp`;
  copyFileSync(source, temporary);
  renameSync(temporary, target); // a new inode: a process that loaded the old file keeps it
}

function saveToCache(pkg, addon) {
  const target = cacheFile(pkg);
  if (existsSync(target)) return;
  try {
    placeAtomically(addon, target);
  } catch {
    // The cache only saves a rebuild later; an unwritable home directory must not fail the install.
  }
}

// --- building -------------------------------------------------------------------------------

/** Compiles the addon in a private copy of the package, caches it and puts it in place. */
function build(pkg, { offline, note }) {
  const headers = findHeaders({ offline, note });
  if (!headers && offline) {
    throw new NativeModuleError(
      `better-sqlite3 ${pkg.version} is built for another Node than this one (${process.version}, NODE_MODULE_VERSION ` +
        `${process.versions.modules}), and no headers of this Node are here to rebuild it without a download. Run ` +
        `\`node ${fileURLToPath(import.meta.url)}\` with this Node (it fetches the headers of Node 20, 22 or 24 from ` +
        `the npm registry), or \`npm ci\` with npm_config_nodedir set to a directory holding this Node's include/node.`,
    );
  }
  const nodeGyp = findNodeGyp();
  mkdirSync(pkg.stateDir, { recursive: true });
  const stage = mkdtempSync(join(pkg.stateDir, 'build-'));
  try {
    const copy = join(stage, basename(pkg.dir));
    cpSync(pkg.dir, copy, {
      recursive: true,
      filter: (source) => ![join(pkg.dir, 'build'), join(pkg.dir, 'node_modules')].includes(source),
    });
    note(
      `compiling better-sqlite3 ${pkg.version} for Node ${process.version} with node-gyp` +
        (headers ? ` against the headers in ${headers}` : ' (it downloads the headers)') +
        ' — a few minutes, once per Node major',
    );
    const env = { ...process.env };
    // npm passes the user's config to scripts as npm_config_*; node-gyp reads them. A nodedir
    // there may belong to another Node (e.g. the system one).
    delete env.npm_config_nodedir;
    delete env.NODE_OPTIONS;
    const log = join(stage, 'node-gyp.log');
    const out = openSync(log, 'w');
    const args = [nodeGyp, 'rebuild', '--release', `--jobs=${availableParallelism()}`];
    if (headers) args.push(`--nodedir=${headers}`);
    const result = spawnSync(process.execPath, args, { cwd: copy, env, stdio: ['ignore', out, out] });
    closeSync(out);
    const built = join(copy, 'build', 'Release', ADDON);
    if (result.status !== 0 || !existsSync(built)) {
      const tail = readFileSync(log, 'utf8').split('\n').slice(-15).join('\n');
      throw new NativeModuleError(
        `node-gyp could not compile better-sqlite3 for Node ${process.version} (it needs python3, make and a C++ compiler):\n${tail}`,
      );
    }
    const check = tryLoad(pkg.dir, built);
    if (!check.ok) throw new NativeModuleError(`the freshly compiled better-sqlite3 does not load: ${check.reason}`);
    saveToCache(pkg, built);
    placeAtomically(built, pkg.addon);
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

/** The version header of an install prefix, if it matches this Node's ABI. */
function headersMatch(prefix) {
  if (!prefix) return false;
  try {
    const header = readFileSync(join(prefix, 'include', 'node', 'node_version.h'), 'utf8');
    const abi = /^#define NODE_MODULE_VERSION (\d+)$/m.exec(header)?.[1];
    return abi === process.versions.modules && existsSync(join(prefix, 'include', 'node', 'common.gypi'));
  } catch {
    return false; // no headers there
  }
}

/** A directory node-gyp can use as --nodedir for this Node, or null. */
function findHeaders({ offline, note }) {
  const nodeCache = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'sessionlog', 'node');
  const major = process.versions.node.split('.')[0];
  const local = [
    process.env.npm_config_nodedir,
    resolve(dirname(process.execPath), '..'),
    join(nodeCache, process.versions.node),
  ];
  const found = local.find(headersMatch);
  if (found) return resolve(found);
  if (offline) return null;
  // A pinned release of the same major has the same ABI and therefore usable headers.
  const pinned = spawnSync(join(SCRIPTS_DIR, 'node-version'), ['versions'], { encoding: 'utf8' });
  const isPinned = pinned.status === 0 && pinned.stdout.split('\n').some((line) => line.split(' ')[0] === major);
  if (!isPinned) return null;
  note(`no headers of Node ${process.version} here; fetching the pinned Node ${major} package for its headers`);
  const fetched = spawnSync(join(SCRIPTS_DIR, 'node-version'), ['prefix', major], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const prefix = fetched.stdout?.trim();
  return fetched.status === 0 && headersMatch(prefix) ? prefix : null;
}

/** node-gyp's CLI: the one npm gave this script, npm's bundled copy, or a local install. */
function findNodeGyp() {
  const candidates = [process.env.npm_config_node_gyp];
  const npmCli = process.env.npm_execpath ?? whichNpm();
  if (npmCli) candidates.push(join(dirname(dirname(npmCli)), 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'));
  try {
    candidates.push(createRequire(join(SCRIPTS_DIR, '..', 'package.json')).resolve('node-gyp/bin/node-gyp.js'));
  } catch {
    // not installed locally: npm's copy is the usual one
  }
  const found = candidates.find((candidate) => candidate && existsSync(candidate));
  if (!found) throw new NativeModuleError('node-gyp was not found (it comes with npm); is npm installed?');
  return found;
}

/** The real path of npm's CLI script found on PATH (…/npm/bin/npm-cli.js), or undefined. */
function whichNpm() {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, 'npm');
    if (dir && existsSync(candidate)) return realpathSync(candidate);
  }
  return undefined;
}

// --- lock -----------------------------------------------------------------------------------

/**
 * Runs fn holding a lock file, so that parallel callers (two test runs, an install and a start)
 * compile once. A lock whose process is gone is taken over. Correctness does not rest on it:
 * every build is private and lands by rename.
 */
function withLock(file, fn) {
  mkdirSync(dirname(file), { recursive: true });
  const deadline = Date.now() + LOCK_WAIT_MS;
  let fd;
  for (;;) {
    try {
      fd = openSync(file, 'wx');
      writeSync(fd, String(process.pid));
      break;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      if (!lockHolderAlive(file)) {
        rmSync(file, { force: true });
        continue;
      }
      if (Date.now() > deadline) throw new NativeModuleError(`gave up waiting for the lock ${file}`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
    }
  }
  try {
    return fn();
  } finally {
    closeSync(fd);
    rmSync(file, { force: true });
  }
}

function lockHolderAlive(file) {
  let pid;
  try {
    pid = Number(readFileSync(file, 'utf8'));
  } catch {
    return true; // removed meanwhile: the next open decides
  }
  if (!pid) return true; // created but its pid not written yet
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

// --- CLI ------------------------------------------------------------------------------------

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2).filter((arg) => arg !== 'ensure');
  const unknown = args.filter((arg) => arg !== '--offline' && arg !== '--quiet');
  if (unknown.length > 0) {
    process.stderr.write(
      `native-modules: unknown argument ${unknown[0]} (usage: native-modules.mjs [ensure] [--offline] [--quiet])\n`,
    );
    process.exit(2);
  }
  try {
    ensureNativeModules({ offline: args.includes('--offline'), quiet: args.includes('--quiet') });
  } catch (error) {
    if (!(error instanceof NativeModuleError)) throw error;
    process.stderr.write(`native-modules: ${error.message}\n`);
    process.exit(1);
  }
}
