#!/usr/bin/env node
/**
 * `npm publish`'s guard (package.json "prepublishOnly"): the registry page of a package links its
 * source, home page and issue tracker from `repository`, `homepage` and `bugs`. mempo has no public
 * address yet, and an invented one would send users somewhere wrong, so the fields are absent and
 * publishing is refused, naming each missing field, until they are filled in.
 * Usage: node scripts/publish-check.js [package.json]
 */
'use strict';
const fs = require('fs');
const path = require('path');

const file = path.resolve(process.argv[2] ?? path.join(__dirname, '..', 'package.json'));
const pkg = JSON.parse(fs.readFileSync(file, 'utf8'));
const url = (v) => (typeof v === 'string' ? v : v && typeof v === 'object' ? v.url : undefined);
const missing = [];
if (!/^(git\+)?https:\/\//.test(url(pkg.repository) ?? '')) missing.push('repository (e.g. { "type": "git", "url": "git+https://…/mempo.git" })');
if (!/^https:\/\//.test(pkg.homepage ?? '')) missing.push('homepage (an https URL)');
if (!/^https:\/\//.test(url(pkg.bugs) ?? '') && !(pkg.bugs && typeof pkg.bugs.email === 'string')) missing.push('bugs (an issue tracker URL or { "email": … })');
if (missing.length > 0) {
  process.stderr.write(`mempo: not publishing ${file}: set ${missing.join('; ')}\n`);
  process.exit(1);
}
