/**
 * The import layers of src/, checked by dependency-cruiser: `npm run lint:layers` (and so
 * `npm run lint`) fails when an import points the wrong way. docs/architecture.md draws the
 * layers; this file is where they are enforced.
 *
 * - **Up a layer.** Every folder of src/ has a rank (LAYERS, bottom to top); a module imports
 *   only from its own folder or from folders ranked below it.
 * - **Across siblings.** Folders of the same rank do not import each other (coordination and
 *   execution meet only in fire/, which is above both).
 * - **Across commands.** A file of src/cli/commands/ does not import another command: what two
 *   commands share lives in src/cli/ (options.ts, format.ts, config-options.ts).
 * - **In a circle.** No cycle among the modules, inside a folder either.
 * - **Unranked.** A folder of src/ that is not in LAYERS is an error until it is given a rank.
 *
 * dependency-cruiser reads the module graph with the TypeScript compiler, so every form of
 * import counts: named, bare (`import './x.js'`), re-exports (`export * from`, `export { x }
 * from`), type-only imports (they still tie two modules' designs together) and dynamic
 * `import()` (loading a module late does not change which way it depends). tsconfig.json makes
 * the `.js` specifiers resolve to the `.ts` files.
 *
 * Each rule's name is what a violation prints, so it says in words what is wrong, e.g.
 * `error imports a layer above (store → cli): src/store/x.ts → src/cli/main.ts`.
 *
 * Run through scripts/lint-layers.mjs (why not `depcruise` itself: that script's header). The
 * other reports work on this file as they are, e.g. `npx depcruise src --output-type text`.
 * dependency-cruiser is pinned at 17.x, its last line that runs on Node 20 (18 needs Node 22).
 */

/**
 * Bottom to top. `leaf` is every file directly in src/ (the vocabulary: errors, exit codes, run
 * statuses, lock names, logging, text) except index.ts, the public surface, which is on top.
 */
const LAYERS = [
  ['leaf'],
  ['schedule', 'sdk'],
  ['config'],
  ['store'],
  ['coordination', 'execution', 'notify'],
  ['fire'],
  ['daemon'],
  ['fleet'],
  ['actions'],
  ['http'],
  ['cli', 'library'],
  ['index'],
];

/** The modules of a layer, as a regular expression over paths from the repository's root. */
function modulesOf(layer) {
  if (layer === 'leaf') return '^src/(?!index[.]ts$)[^/]+$';
  if (layer === 'index') return '^src/index[.]ts$';
  return `^src/${layer}/`;
}

const FOLDERS = LAYERS.flat().filter((layer) => layer !== 'leaf' && layer !== 'index');
/** Any module in a folder of src/ that LAYERS does not name. */
const UNRANKED = `^src/(?!(?:${FOLDERS.join('|')})/)[^/]+/`;
const UNRANKED_NAME = 'in a folder that has no layer (add it to LAYERS in .dependency-cruiser.mjs)';

/** One rule per pair of layers that must not meet: the importer's rank is not above the other's. */
const layerRules = LAYERS.flatMap((names, rank) =>
  names.flatMap((from) =>
    LAYERS.slice(rank)
      .flat()
      .filter((to) => to !== from)
      .map((to) => ({
        name: `imports ${names.includes(to) ? 'a sibling layer' : 'a layer above'} (${from} → ${to})`,
        severity: 'error',
        from: { path: modulesOf(from) },
        to: { path: modulesOf(to) },
      })),
  ),
);

/** The rules that each surface of `action` imports src/actions/<action>.ts. */
function surfaces(action, modules) {
  return modules.map((module) => ({
    name: `${module} does not use the ${action} action (src/actions/${action}.ts)`,
    severity: 'error',
    module: { path: `^src/${module}\\.ts$` },
    to: { path: `^src/actions/${action}\\.ts$` },
  }));
}

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    ...layerRules,
    {
      name: 'one command imports another (share it from src/cli/)',
      severity: 'error',
      from: { path: '^src/cli/commands/' },
      to: { path: '^src/cli/commands/' },
    },
    {
      name: 'circular',
      comment: 'Type-only imports count: they tie two modules together as much as any other.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    // A module in an unranked folder is named whichever way it is tied to the rest, and when it
    // is tied to nothing (orphan), so a new folder cannot slip past by importing nothing.
    { name: UNRANKED_NAME, severity: 'error', from: { path: UNRANKED }, to: {} },
    { name: UNRANKED_NAME, severity: 'error', from: { path: UNRANKED, orphan: true }, to: {} },
    {
      name: `imports a module ${UNRANKED_NAME}`,
      severity: 'error',
      from: { pathNot: UNRANKED },
      to: { path: UNRANKED },
    },
    {
      // The write API acts in the runner that serves it, through src/actions: it starts no
      // process (once, a backfill was a `baton backfill` child: two implementations).
      name: 'the HTTP layer starts a process (act through src/actions instead)',
      severity: 'error',
      from: { path: '^src/http/' },
      to: { dependencyTypes: ['core'], path: '^(node:)?child_process$' },
    },
    {
      // An import dependency-cruiser cannot follow to a file would drop out of every rule above
      // unseen; the type check fails on it too, but this check should not pass meanwhile.
      name: 'imports a relative path that is not a module',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true, path: '^[.]{1,2}/' },
    },
  ],
  // One implementation per operator action (src/actions): each surface that offers the action
  // imports it, so that a surface cannot grow its own copy unnoticed. Which surfaces offer what:
  // docs/architecture.md, "Operator actions".
  required: [
    ...surfaces('run', ['cli/commands/run', 'http/write-actions', 'library/scheduler']),
    // Asking another runner (`--on-host`, a placed job, a library-mode job): one implementation.
    ...surfaces('run-request', ['cli/fleet-run', 'http/write-actions']),
    // Every runner takes the requests: both composition roots start the one watch.
    ...surfaces('run-request-watch', ['cli/commands/start', 'library/scheduler']),
    ...surfaces('backfill', ['cli/commands/backfill', 'http/write-actions']),
    ...surfaces('pause', ['cli/commands/pause', 'http/write-actions']),
    ...surfaces('kill', ['cli/commands/kill', 'http/write-actions']),
    ...surfaces('definitions', ['cli/commands/definitions']),
  ],
  options: {
    // Packages are leaves of the graph here: their own imports are not read.
    doNotFollow: { path: 'node_modules' },
    // The compiler options the code is written for. A `.js` specifier of a `.ts` file (NodeNext)
    // resolves to that file as the compiler resolves it: dependency-cruiser tries the `.ts`
    // when the `.js` is not there.
    tsConfig: { fileName: 'tsconfig.json' },
    // Type-only imports are edges too (the compiler erases them, the design does not).
    tsPreCompilationDeps: true,
    moduleSystems: ['es6', 'cjs'],
    skipAnalysisNotInRules: true,
  },
};
