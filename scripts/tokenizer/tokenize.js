// GPT-2's byte-pair encoding of a text file into nanoGPT's .bin format (little-endian uint16
// token ids), for data.format: tokens. Usage: node tokenize.js IN OUT.bin (scripts/tokenize).
'use strict';
const fs = require('fs');
const { encode } = require('gpt-3-encoder');

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: tokenize.js IN OUT.bin');
  process.exit(2);
}
const text = fs.readFileSync(input, 'utf8');
// Line by line keeps the encoder's memory small on large files; the newline is a token too.
const ids = [];
for (const line of text.split(/(?<=\n)/)) {
  for (const id of encode(line)) ids.push(id);
}
const out = Buffer.alloc(ids.length * 2);
ids.forEach((id, i) => out.writeUInt16LE(id, 2 * i));
fs.writeFileSync(output, out);
console.log(`${input}: ${text.length} characters -> ${ids.length} GPT-2 tokens (vocab 50257) in ${output}`);
