/**
 * Test hosts in Linux network namespaces, and real network faults made by the kernel on their
 * links: the host's packets delayed and lost, every packet lost (a partition: no FIN, no RST —
 * the peer's kernel never hears of it), or its link down.
 *
 * Topology. Each host is a namespace `bt-<pid>-<n>` with loopback up and one veth pair to the ROOT
 * namespace, on a /30 of its own in 10.213.0.0/16: `gateway` (.1 of the /30) on the root side,
 * `address` (.2) inside. The namespace has no route but that /30 (no default route), so a host
 * reaches the root side's address and nothing else. The pair ends in the root namespace rather
 * than in a namespace of the server's own: the private server, the other runners and the test's
 * own connections all stay on 127.0.0.1 as everywhere else in the suite (the server listens on
 * the gateway address too, `bindAddresses`), and a fault on one host's pair touches that host only.
 *
 * How faults are made, by what this kernel has:
 *  - `tc netem` on the egress of both ends of the pair (host → server on the namespace's end,
 *    server → host on the root's end) when the kernel has `sch_netem`;
 *  - otherwise `nftables` drop rules on the ingress of both ends (`numgen random` for a share of
 *    the packets): still the kernel dropping real packets on the link, as a lossy or cut wire
 *    does. A delay cannot be made that way; `netem` is the only delaying qdisc, so without it
 *    `canDelay` is false and a test that needs a slow link makes the delay in user space
 *    (`tcp-proxy.ts` on the gateway address) and says so. `ip link set down` needs neither.
 * Some CI kernels are built without `sch_netem` and without module loading (this VM's is):
 * `faultSupport()` tells which way is used, and a test skips, with the reason, only where
 * neither exists.
 *
 * Clean-up is layered, like private-server.ts's: `destroy()` in the test's `afterAll`; a process
 * 'exit' handler; a janitor process holding a pipe from this one, which deletes what is still
 * registered when the pipe closes however this process died (vitest ends its workers with
 * SIGTERM, which skips 'exit'); and at the first host of a process, a sweep of the namespaces,
 * links, nftables tables and subnet claims of `bt-` processes that are gone.
 *
 * Names carry the pid, and each /30 is claimed by a file in /run/baton-netns, so test files (and
 * soak runs) in parallel never collide.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import path from 'node:path';

const CLAIMS_DIR = '/run/baton-netns';
/** 10.213.0.0/16 in /30s: 16,384 hosts' links. */
const SUBNETS = 16_384;

export interface LinkDegradation {
  /** Added to every packet the host sends, in ms (netem only: see `faultSupport().canDelay`). */
  delayMs?: number;
  /** Share of the host's packets lost, in percent. */
  lossPercent?: number;
}

export interface NetHost {
  /** The namespace's name, for `ip netns exec` (startRunner's `netns`). */
  readonly name: string;
  /** The host's address, inside its namespace. */
  readonly address: string;
  /** The root side of its link: what the host reaches the server at. */
  readonly gateway: string;
  /** The veth ends: `rootDev` in the root namespace, `hostDev` in the host's. */
  readonly rootDev: string;
  readonly hostDev: string;
  /**
   * The host's packets are delayed and a share of them lost, as `tc qdisc add dev <host's link>
   * root netem delay D loss L` does: on what the host sends (its egress), not what it receives.
   */
  degrade(degradation: LinkDegradation): void;
  /** Every packet lost, both ways: a partition. Nothing is closed and nobody is told. */
  partition(): void;
  /** The host's own interface goes down (`ip link set down`): no carrier, no route. */
  linkDown(): void;
  /** Back to a clean link: no loss, no delay, interface up. */
  clear(): void;
  /** Packets dropped by this host's faults so far (by netem or by the nftables rules). */
  dropped(): number;
  /** Deletes the namespace (and with it the pair), its rules and its claim. */
  destroy(): void;
}

export interface FaultSupport {
  /** Namespaces can be made here (root, `ip`, `ip netns add` works); else why not. */
  netns: { ok: true } | { ok: false; reason: string };
  /** How loss is made: `netem`, `nftables`, or null (with the reason in `lossReason`). */
  loss: 'netem' | 'nftables' | null;
  lossReason: string;
  /** Whether the kernel can delay packets (`sch_netem`). */
  canDelay: boolean;
}

const run = (cmd: string, args: string[], input?: string): string =>
  execFileSync(cmd, args, {
    encoding: 'utf8',
    input,
    stdio: ['pipe', 'pipe', 'pipe'],
  });

/** Runs a command, returning its error (with stderr) instead of throwing. */
function attempt(cmd: string, args: string[], input?: string): Error | null {
  try {
    run(cmd, args, input);
    return null;
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim();
    return new Error(`${cmd} ${args.join(' ')}: ${stderr || (err as Error).message}`);
  }
}

let support: FaultSupport | undefined;

/**
 * What this machine allows, probed once per process in a namespace of its own (synchronous, for
 * `describe.skipIf` at collection time).
 */
export function faultSupport(): FaultSupport {
  if (support) return support;
  const none = (reason: string): FaultSupport => ({
    netns: { ok: false, reason },
    loss: null,
    lossReason: reason,
    canDelay: false,
  });
  if (process.platform !== 'linux') return (support = none('network namespaces need Linux'));
  if (process.getuid?.() !== 0) return (support = none('network namespaces need root'));
  if (attempt('ip', ['-V'])) return (support = none('no `ip` (iproute2): see .ci/run'));
  sweepStale();
  const probe = `bt-${process.pid}-probe`;
  const added = attempt('ip', ['netns', 'add', probe]);
  if (added) return (support = none(`\`ip netns add\` is not allowed here (${added.message})`));
  try {
    attempt('ip', ['-n', probe, 'link', 'set', 'lo', 'up']);
    // Probed on the probe namespace's loopback: harmless, and gone with the namespace.
    const netem = attempt('tc', [
      '-n',
      probe,
      'qdisc',
      'add',
      'dev',
      'lo',
      'root',
      'netem',
      'delay',
      '1ms',
    ]);
    if (!netem)
      return (support = { netns: { ok: true }, loss: 'netem', lossReason: '', canDelay: true });
    const nft = attempt(
      'ip',
      ['netns', 'exec', probe, 'nft', '-f', '-'],
      'table netdev probe {\n chain c { type filter hook ingress device "lo" priority 0; }\n}\n',
    );
    if (!nft) {
      return (support = { netns: { ok: true }, loss: 'nftables', lossReason: '', canDelay: false });
    }
    return (support = {
      netns: { ok: true },
      loss: null,
      lossReason: `neither tc netem (${netem.message}) nor nftables (${nft.message}) works here`,
      canDelay: false,
    });
  } finally {
    attempt('ip', ['netns', 'del', probe]);
  }
}

/** Why a test that needs namespaces and loss cannot run here, or null if it can. */
export function lossUnsupported(): string | null {
  const s = faultSupport();
  if (!s.netns.ok) return s.netns.reason;
  return s.loss ? null : s.lossReason;
}

/** Why a test that needs namespaces cannot run here, or null if it can. */
export function netnsUnsupported(): string | null {
  const s = faultSupport();
  return s.netns.ok ? null : s.netns.reason;
}

let hostCount = 0;

/** A new host: its namespace, its link to the root namespace, loopback up. */
export function createNetHost(): NetHost {
  const s = faultSupport();
  if (!s.netns.ok) throw new Error(s.netns.reason);
  const n = ++hostCount;
  const name = `bt-${process.pid}-${n}`;
  // IFNAMSIZ is 16: "bt-4194304-99r" is 14 characters at the largest pid.
  const rootDev = `${name}r`;
  const hostDev = `${name}h`;
  const table = `bt_${process.pid}_${n}`;
  const subnet = claimSubnet(name);
  const base = (subnet * 4) >>> 0;
  const ip = (k: number) => `10.213.${(base + k) >> 8}.${(base + k) & 255}`;
  const gateway = ip(1);
  const address = ip(2);

  janitor().track(`ns ${name}`);
  janitor().track(`link ${rootDev}`);
  janitor().track(`nft ${table}`);
  janitor().track(`claim ${subnet}`);
  live.set(name, { rootDev, table, subnet });
  try {
    run('ip', ['netns', 'add', name]);
    run('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
    run('ip', ['link', 'add', rootDev, 'type', 'veth', 'peer', 'name', hostDev, 'netns', name]);
    run('ip', ['addr', 'add', `${gateway}/30`, 'dev', rootDev]);
    run('ip', ['link', 'set', rootDev, 'up']);
    run('ip', ['-n', name, 'addr', 'add', `${address}/30`, 'dev', hostDev]);
    run('ip', ['-n', name, 'link', 'set', hostDev, 'up']);
  } catch (err) {
    cleanUp(name);
    throw err;
  }

  let droppedBefore = 0; // by rules or qdiscs already removed
  const readDropped = (): number => {
    if (s.loss === 'netem') {
      const stats = tcStats(['dev', rootDev]) + tcStats(['-n', name, 'dev', hostDev]);
      return [...stats.matchAll(/dropped (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
    }
    return nftDropped(table) + nftDropped(table, name);
  };
  const removeFaults = () => {
    droppedBefore += readDropped();
    if (s.loss === 'netem') {
      attempt('tc', ['qdisc', 'del', 'dev', rootDev, 'root']);
      attempt('tc', ['-n', name, 'qdisc', 'del', 'dev', hostDev, 'root']);
    } else {
      attempt('nft', ['delete', 'table', 'netdev', table]);
      attempt('ip', ['netns', 'exec', name, 'nft', 'delete', 'table', 'netdev', table]);
    }
  };
  /** Loss (and delay) on what one end sends (netem) or receives (nftables). */
  const apply = (towardServer: LinkDegradation, towardHost: LinkDegradation) => {
    removeFaults();
    if (s.loss === 'netem') {
      // egress of the host's end: what the host sends; egress of the root's end: what it gets.
      netem(['-n', name, 'dev', hostDev], towardServer);
      netem(['dev', rootDev], towardHost);
    } else {
      if ((towardServer.delayMs ?? 0) > 0 || (towardHost.delayMs ?? 0) > 0) {
        throw new Error('no tc netem in this kernel: a delay cannot be made (see canDelay)');
      }
      // ingress of the root's end: what the host sent; ingress of the host's end: what it gets.
      nftDrop(table, rootDev, towardServer.lossPercent ?? 0);
      nftDrop(table, hostDev, towardHost.lossPercent ?? 0, name);
    }
  };

  return {
    name,
    address,
    gateway,
    rootDev,
    hostDev,
    degrade(degradation) {
      apply(degradation, {});
    },
    partition() {
      apply({ lossPercent: 100 }, { lossPercent: 100 });
    },
    linkDown() {
      run('ip', ['-n', name, 'link', 'set', hostDev, 'down']);
    },
    clear() {
      removeFaults();
      run('ip', ['-n', name, 'link', 'set', hostDev, 'up']);
    },
    dropped() {
      return droppedBefore + readDropped();
    },
    destroy() {
      cleanUp(name);
    },
  };
}

function netem(where: string[], { delayMs = 0, lossPercent = 0 }: LinkDegradation): void {
  if (delayMs <= 0 && lossPercent <= 0) return;
  const [ns, dev] = where[0] === '-n' ? [where.slice(0, 2), where.slice(2)] : [[], where];
  run('tc', [
    ...ns,
    'qdisc',
    'add',
    ...dev,
    'root',
    'netem',
    ...(delayMs > 0 ? ['delay', `${delayMs}ms`] : []),
    ...(lossPercent > 0 ? ['loss', `${lossPercent}%`] : []),
  ]);
}

function tcStats(where: string[]): string {
  const [ns, dev] = where[0] === '-n' ? [where.slice(0, 2), where.slice(2)] : [[], where];
  try {
    return run('tc', [...ns, '-s', 'qdisc', 'show', ...dev]);
  } catch {
    return '';
  }
}

/** A netdev table dropping `percent` % of what `dev` receives (in namespace `ns`, or the root). */
function nftDrop(table: string, dev: string, percent: number, ns?: string): void {
  if (percent <= 0) return;
  const rule =
    percent >= 100
      ? 'counter drop'
      : `numgen random mod 10000 < ${Math.round(percent * 100)} counter drop`;
  const script = `table netdev ${table} {
  chain in { type filter hook ingress device "${dev}" priority 0; policy accept; ${rule}; }
}`;
  if (ns) run('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], script);
  else run('nft', ['-f', '-'], script);
}

function nftDropped(table: string, ns?: string): number {
  try {
    const args = ['list', 'table', 'netdev', table];
    const text = ns ? run('ip', ['netns', 'exec', ns, 'nft', ...args]) : run('nft', args);
    return [...text.matchAll(/packets (\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  } catch {
    return 0; // no such table: nothing dropped since the last clear
  }
}

// ---------------------------------------------------------------------------------------------
// Subnets: a /30 is taken by creating its claim file (O_EXCL), which names the owning pid.

function claimSubnet(name: string): number {
  mkdirSync(CLAIMS_DIR, { recursive: true });
  // Start where this process is unlikely to meet another one, then look for a free one.
  const start = (process.pid * 37 + hostCount * 101) % SUBNETS;
  for (let i = 0; i < SUBNETS; i++) {
    const subnet = (start + i) % SUBNETS;
    const file = path.join(CLAIMS_DIR, String(subnet));
    try {
      writeFileSync(file, `${process.pid} ${name}\n`, { flag: 'wx' });
      return subnet;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  throw new Error(`no free /30 in 10.213.0.0/16 (claims in ${CLAIMS_DIR})`);
}

// ---------------------------------------------------------------------------------------------
// Clean-up.

const live = new Map<string, { rootDev: string; table: string; subnet: number }>();

/** Deletes a host of this process: synchronous, so that the 'exit' handler can use it too. */
function cleanUp(name: string): void {
  const host = live.get(name);
  if (!host) return;
  live.delete(name);
  // Deleting the namespace deletes its veth end, and with it the root's end; its nftables
  // tables go with it. The root end is deleted by name too, in case the namespace outlives its
  // name (a process still in it keeps it alive after `ip netns del`).
  attempt('ip', ['netns', 'del', name]);
  attempt('ip', ['link', 'del', host.rootDev]);
  attempt('nft', ['delete', 'table', 'netdev', host.table]);
  rmSync(path.join(CLAIMS_DIR, String(host.subnet)), { force: true });
  for (const item of [
    `ns ${name}`,
    `link ${host.rootDev}`,
    `nft ${host.table}`,
    `claim ${host.subnet}`,
  ]) {
    janitor().untrack(item);
  }
}

process.once('exit', () => {
  for (const name of [...live.keys()]) cleanUp(name);
});

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** What processes that are gone left behind: namespaces, links, tables, claims named `bt-<pid>`. */
function sweepStale(): void {
  const dead = (pid: string) => Number(pid) !== process.pid && !pidAlive(Number(pid));
  const list = (cmd: string, args: string[]) => {
    try {
      return run(cmd, args);
    } catch {
      return '';
    }
  };
  for (const m of list('ip', ['netns', 'list']).matchAll(/^bt-(\d+)-\S+/gm)) {
    if (dead(m[1]!)) attempt('ip', ['netns', 'del', m[0]]);
  }
  for (const m of list('ip', ['-o', 'link', 'show']).matchAll(/^\d+: (bt-(\d+)-\d+r)[@:]/gm)) {
    if (dead(m[2]!)) attempt('ip', ['link', 'del', m[1]!]);
  }
  for (const m of list('nft', ['list', 'tables', 'netdev']).matchAll(
    /table netdev (bt_(\d+)_\d+)/g,
  )) {
    if (dead(m[2]!)) attempt('nft', ['delete', 'table', 'netdev', m[1]!]);
  }
  const claims = list('ls', [CLAIMS_DIR]).split('\n').filter(Boolean);
  for (const claim of claims) {
    const file = path.join(CLAIMS_DIR, claim);
    try {
      const owner = readFileSync(file, 'utf8').split(' ')[0] ?? '';
      if (dead(owner)) rmSync(file, { force: true });
    } catch {
      // Taken and released meanwhile.
    }
  }
}

/**
 * Runs in its own process, ignores the usual termination signals (Ctrl-C reaches the whole
 * process group), and deletes what is still registered once its stdin closes — that is, once
 * the test process is gone, however it died.
 */
const JANITOR_SOURCE = `
const { execFileSync } = require('node:child_process');
const { rmSync } = require('node:fs');
for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(s, () => {});
const items = new Set();
let buffer = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffer += chunk;
  let nl;
  while ((nl = buffer.indexOf('\\n')) >= 0) {
    const line = buffer.slice(0, nl);
    buffer = buffer.slice(nl + 1);
    line[0] === '+' ? items.add(line.slice(1)) : items.delete(line.slice(1));
  }
});
const run = (cmd, args) => { try { execFileSync(cmd, args, { stdio: 'ignore' }); } catch {} };
process.stdin.on('close', () => {
  for (const item of items) {
    const [kind, value] = item.split(' ');
    if (kind === 'ns') run('ip', ['netns', 'del', value]);
    if (kind === 'link') run('ip', ['link', 'del', value]);
    if (kind === 'nft') run('nft', ['delete', 'table', 'netdev', value]);
    if (kind === 'claim') rmSync(${JSON.stringify(CLAIMS_DIR)} + '/' + value, { force: true });
  }
  process.exit(0);
});
`;

interface Janitor {
  track(item: string): void;
  untrack(item: string): void;
}

let janitorInstance: Janitor | undefined;

function janitor(): Janitor {
  if (janitorInstance) return janitorInstance;
  const proc = spawn(process.execPath, ['-e', JANITOR_SOURCE], {
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  // Neither the janitor nor its pipe may keep this process alive.
  proc.unref();
  const pipe = proc.stdin as Socket;
  pipe.unref();
  pipe.on('error', () => undefined); // a dead janitor must not crash the tests
  const send = (line: string) => {
    if (!pipe.destroyed) pipe.write(`${line}\n`);
  };
  janitorInstance = {
    track: (item) => send(`+${item}`),
    untrack: (item) => send(`-${item}`),
  };
  return janitorInstance;
}
