#!/usr/bin/env node
/**
 * The `baton` executable: the command line of ./program.ts on this process's arguments.
 */
import { hideBin } from 'yargs/helpers';
import { ExitCode } from '../exit-codes.js';
import { runCli } from './program.js';

// `baton history | head` closes stdout early: that is the reader's choice, not an error (a
// command that must go on after it, like `baton run`, handles this itself).
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  // A command with a handler of its own (baton run) decides; everyone else is done.
  if (process.stdout.listenerCount('error') === 1) process.exit(process.exitCode ?? ExitCode.Ok);
});

// A usage mistake ends the process at once, as yargs' own --help and --version do.
const usageExit = await runCli(hideBin(process.argv));
if (usageExit != null) process.exit(usageExit);
