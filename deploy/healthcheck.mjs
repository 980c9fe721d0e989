#!/usr/bin/env node
/**
 * The container's HEALTHCHECK: GET /healthz of this runner's own HTTP endpoint (BATON_HTTP), with
 * its token when one is set. Slim images have no curl, and node's fetch needs nothing else.
 * Exit 0 healthy, 1 unhealthy (Docker's convention), with one line saying why.
 */
// The daemon's own parser (the image has dist/ beside this file): the same host:port rules.
import { parseListenAddress } from '../dist/http/address.js';

const address = process.env.BATON_HTTP;
const token = process.env.BATON_HTTP_TOKEN;

function fail(why) {
  console.error(`healthcheck: ${why}`);
  process.exit(1);
}

if (!address) fail('BATON_HTTP is not set: no endpoint to ask (disable the healthcheck instead)');
let listen;
try {
  listen = parseListenAddress(address);
} catch (err) {
  fail(err.message);
}
// A wildcard listener is reached through this container's loopback.
const host = { '0.0.0.0': '127.0.0.1', '::': '::1' }[listen.host] ?? listen.host;
const url = `http://${host.includes(':') ? `[${host}]` : host}:${listen.port}/healthz`;

try {
  const response = await fetch(url, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
    signal: AbortSignal.timeout(4_000),
  });
  if (!response.ok) {
    const body = (await response.text()).replace(/\s+/g, ' ').slice(0, 300);
    fail(`${url} answered ${response.status}: ${body}`);
  }
} catch (err) {
  fail(`${url}: ${err.cause?.code ?? err.message}`);
}
