// Turns the prototype relaxed-SIMD multiply-add that Emscripten 3.1.6's LLVM 14 emits (`f32x4.fma`,
// bytes fd af 01) into the final instruction that browsers run (`f32x4.relaxed_madd`, fd 85 02),
// by decoding every instruction of the code section: only an opcode that sits where an
// instruction starts is rewritten, never bytes that happen to match inside an immediate (a
// v128.const, a shuffle's lanes, an offset). Used by wasm/CMakeLists.txt after the relaxed
// module's link, and by the tests to check the shipped bytes:
//   node relaxed_opcodes.cjs rewrite IN.wasm OUT.wasm   prototype fma -> relaxed_madd, then check
//   node relaxed_opcodes.cjs check FILE.wasm [--expect-madd|--expect-none]
// `check` prints `relaxed_madd N, prototype 0` and fails (exit 1) on any prototype relaxed opcode,
// on an opcode it does not know, or when the expectation is not met.
//
// Why not a tool: a current Binaryen or wabt reads only the final opcodes, so neither can parse a
// module that holds fd af 01 (0xaf is a hole in the final SIMD128 table), and Binaryen 108 (the
// one Emscripten 3.1.6 runs after linking) reads only the prototype ones: see wasm/README.md,
// "The relaxed-SIMD module".
'use strict';

const fs = require('node:fs');

const PROTO_FMA = 0xaf;           // f32x4.fma in LLVM 14 / Binaryen 108 (the prototype)
const RELAXED_MADD = 0x105;       // f32x4.relaxed_madd in the final relaxed-SIMD proposal
// The holes of the final SIMD128 table below 0x100: where the prototype's relaxed instructions
// lived (fma, fms, laneselect, relaxed min/max, swizzle, trunc...). Any of them but fma is refused.
const SIMD_HOLES = new Set([0x9a, 0xa2, 0xa5, 0xa6, 0xaf, 0xb0, 0xb2, 0xb3, 0xb4, 0xbb, 0xc2, 0xc5,
                            0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4, 0xe2, 0xee]);
const RELAXED_NAMES = { 0x100: 'i8x16.relaxed_swizzle', 0x105: 'f32x4.relaxed_madd', 0x106: 'f32x4.relaxed_nmadd' };

class Reader {
  constructor(buf, pos, end) { Object.assign(this, { buf, pos, end }); }
  byte() {
    if (this.pos >= this.end) throw new Error(`unexpected end at byte ${this.pos}`);
    return this.buf[this.pos++];
  }
  u32() {  // unsigned LEB128 (up to 5 bytes)
    let v = 0, shift = 0, b;
    do {
      b = this.byte();
      v += (b & 0x7f) * 2 ** shift;
      shift += 7;
      if (shift > 35) throw new Error(`LEB128 too long at byte ${this.pos}`);
    } while (b & 0x80);
    return v;
  }
  sleb(maxBytes) {  // signed LEB128: only skipped, never interpreted
    for (let i = 0; i < maxBytes; ++i) if (!(this.byte() & 0x80)) return;
    throw new Error(`signed LEB128 too long at byte ${this.pos}`);
  }
  skip(n) {
    if (this.pos + n > this.end) throw new Error(`unexpected end at byte ${this.pos}`);
    this.pos += n;
  }
  memarg() { this.u32(); this.u32(); }  // alignment, offset
}

// Writes v as an unsigned LEB128 of exactly `len` bytes (padded with 0x80 continuation bytes), so
// that no size in the module changes.
function writeLebPadded(buf, pos, v, len) {
  for (let i = 0; i < len; ++i) {
    const b = v & 0x7f;
    v >>>= 7;
    buf[pos + i] = i < len - 1 ? b | 0x80 : b;
  }
  if (v !== 0) throw new Error(`opcode 0x${v.toString(16)} does not fit in ${len} LEB128 bytes`);
}

const VALTYPES = new Set([0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f]);
function blocktype(r) {
  const b = r.buf[r.pos];
  if (b === 0x40 || VALTYPES.has(b)) r.skip(1);
  else r.sleb(5);  // a type index (s33)
}

// Decodes one function body's instructions, calling onSimd(opcode, opcodePos, opcodeLen) for each
// 0xfd-prefixed instruction.
function walkBody(r, onSimd) {
  for (let groups = r.u32(); groups > 0; --groups) { r.u32(); r.byte(); }  // locals: count, type
  while (r.pos < r.end) {
    const at = r.pos, op = r.byte();
    if (op <= 0x01 || op === 0x05 || op === 0x0b || op === 0x0f || op === 0x19 || op === 0x1a ||
        op === 0x1b || op === 0xd1 || (op >= 0x45 && op <= 0xc4)) continue;  // no immediate
    if (op >= 0x28 && op <= 0x3e) { r.memarg(); continue; }  // loads and stores
    switch (op) {
      case 0x02: case 0x03: case 0x04: case 0x06: blocktype(r); continue;  // block loop if try
      case 0x07: case 0x08: case 0x09: case 0x0c: case 0x0d: case 0x10: case 0x12: case 0x18:
      case 0x20: case 0x21: case 0x22: case 0x23: case 0x24: case 0x25: case 0x26: case 0xd2:
        r.u32(); continue;  // catch throw rethrow br br_if call return_call delegate locals globals tables ref.func
      case 0x0e: for (let n = r.u32() + 1; n > 0; --n) r.u32(); continue;  // br_table
      case 0x11: case 0x13: r.u32(); r.u32(); continue;  // call_indirect: type, table
      case 0x1c: r.skip(r.u32()); continue;  // select t*
      case 0x3f: case 0x40: r.u32(); continue;  // memory.size/grow: memory index
      case 0x41: r.sleb(5); continue;
      case 0x42: r.sleb(10); continue;
      case 0x43: r.skip(4); continue;
      case 0x44: r.skip(8); continue;
      case 0xd0: r.byte(); continue;  // ref.null t
      case 0xfc: {  // saturating truncation, bulk memory, tables
        const sub = r.u32();
        if (sub <= 7) continue;
        if ([8, 12, 14].includes(sub)) { r.u32(); r.u32(); continue; }
        if (sub === 10) { r.u32(); r.u32(); continue; }
        if ([9, 11, 13, 15, 16, 17].includes(sub)) { r.u32(); continue; }
        throw new Error(`unknown opcode fc ${sub} at byte ${at}`);
      }
      case 0xfe: {  // threads: atomic.fence has one zero byte, every other one a memarg
        const sub = r.u32();
        if (sub === 0x03) r.byte();
        else if (sub <= 0x02 || (sub >= 0x10 && sub <= 0x4e)) r.memarg();
        else throw new Error(`unknown opcode fe ${sub} at byte ${at}`);
        continue;
      }
      case 0xfd: {
        const sub = r.u32();
        onSimd(sub, at + 1, r.pos - at - 1);
        if (sub <= 0x0b || sub === 0x5c || sub === 0x5d) r.memarg();  // loads, store, load_zero
        else if (sub === 0x0c || sub === 0x0d) r.skip(16);  // v128.const, i8x16.shuffle
        else if (sub >= 0x15 && sub <= 0x22) r.byte();  // extract/replace_lane
        else if (sub >= 0x54 && sub <= 0x5b) { r.memarg(); r.byte(); }  // load/store_lane
        else if (sub > 0x113) throw new Error(`unknown opcode fd ${sub} at byte ${at}`);
        continue;
      }
      default:
        throw new Error(`unknown opcode 0x${op.toString(16)} at byte ${at}`);
    }
  }
}

// Walks every function body of a module; returns { madd, proto } counts. With rewrite, turns each
// prototype fma into relaxed_madd in `buf` (in place; same length).
function scan(buf, { rewrite = false } = {}) {
  if (buf.readUInt32LE(0) !== 0x6d736100 || buf.readUInt32LE(4) !== 1) throw new Error('not a WebAssembly module');
  const counts = { madd: 0, proto: 0 };
  const r = new Reader(buf, 8, buf.length);
  let sawCode = false;
  while (r.pos < buf.length) {
    const id = r.byte(), size = r.u32(), end = r.pos + size;
    if (id === 10) {
      sawCode = true;
      for (let n = r.u32(); n > 0; --n) {
        const bodySize = r.u32(), bodyEnd = r.pos + bodySize;
        walkBody(new Reader(buf, r.pos, bodyEnd), (sub, pos, len) => {
          if (sub === PROTO_FMA) {
            counts.proto++;
            if (rewrite) writeLebPadded(buf, pos, RELAXED_MADD, len);
          } else if (SIMD_HOLES.has(sub)) {
            throw new Error(`prototype relaxed-SIMD opcode fd 0x${sub.toString(16)} at byte ${pos - 1}: ` +
                            'only f32x4.fma (0xaf) is rewritten; use no other relaxed builtin');
          } else if (sub === RELAXED_MADD) {
            counts.madd++;
          } else if (sub >= 0x100) {
            throw new Error(`relaxed opcode fd 0x${sub.toString(16)} (${RELAXED_NAMES[sub] || 'unexpected'}) ` +
                            `at byte ${pos - 1}: this module uses f32x4.relaxed_madd only`);
          }
        });
        r.pos = bodyEnd;
      }
      if (r.pos !== end) throw new Error('code section size mismatch');
    }
    r.pos = end;
  }
  if (!sawCode) throw new Error('no code section');
  return counts;
}

function main(argv) {
  const [cmd, file, arg] = argv;
  if (cmd === 'rewrite' && file && arg) {
    const buf = fs.readFileSync(file);
    const before = scan(buf, { rewrite: true });
    const after = scan(buf);
    if (after.proto !== 0 || after.madd !== before.madd + before.proto) throw new Error('rewrite: counts do not add up');
    if (after.madd === 0) throw new Error(`rewrite: ${file} has no f32x4.fma to rewrite (built without -mrelaxed-simd?)`);
    fs.writeFileSync(arg, buf);
    console.log(`relaxed_opcodes: ${arg}: relaxed_madd ${after.madd} (rewritten from prototype fma ${before.proto}), prototype 0`);
    return 0;
  }
  if (cmd === 'check' && file) {
    const c = scan(fs.readFileSync(file));
    console.log(`relaxed_opcodes: ${file}: relaxed_madd ${c.madd}, prototype ${c.proto}`);
    if (c.proto !== 0) return 1;
    if (arg === '--expect-madd' && c.madd === 0) return 1;
    if (arg === '--expect-none' && c.madd !== 0) return 1;
    return 0;
  }
  console.error('usage: relaxed_opcodes.cjs rewrite IN.wasm OUT.wasm | check FILE.wasm [--expect-madd|--expect-none]');
  return 2;
}

if (require.main === module) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (e) {
    console.error(`relaxed_opcodes: ${e.message}`);
    process.exitCode = 1;
  }
}

module.exports = { scan };
