// bench/browser/onnx_matmul.mjs: the bytes of an ONNX model with one MatMul node, C = A B, with
// two float inputs A, B of shape [n, n] and one output C (opset 13, IR version 7), written as
// protobuf by hand so that the bench needs no Python or onnx package. Field numbers from onnx.proto:
// ModelProto { ir_version 1, producer_name 2, graph 7, opset_import 8 }, GraphProto { node 1,
// name 2, input 11, output 12 }, NodeProto { input 1, output 2, name 3, op_type 4 },
// ValueInfoProto { name 1, type 2 }, TypeProto { tensor_type 1 }, TypeProto.Tensor { elem_type 1
// (FLOAT = 1), shape 2 }, TensorShapeProto { dim 1 }, Dimension { dim_value 1 },
// OperatorSetIdProto { domain 1, version 2 }.

function varint(x) {
  const out = [];
  for (; x >= 0x80; x = Math.floor(x / 128)) out.push((x % 128) | 0x80);
  out.push(x);
  return out;
}
// A field: (number << 3 | wire type), then the value (wire type 0) or length + bytes (type 2).
const num = (field, x) => [...varint(field << 3), ...varint(x)];
const bytes = (field, b) => [...varint((field << 3) | 2), ...varint(b.length), ...b];
const str = (field, s) => bytes(field, [...new TextEncoder().encode(s)]);

function tensorInfo(name, n) {
  const dim = (d) => bytes(1, num(1, d));
  const shape = bytes(2, [...dim(n), ...dim(n)]);
  const tensorType = bytes(1, [...num(1, 1), ...shape]);
  return [...str(1, name), ...bytes(2, tensorType)];
}

export function matmulModel(n) {
  const node = [...str(1, 'A'), ...str(1, 'B'), ...str(2, 'C'), ...str(3, 'matmul'), ...str(4, 'MatMul')];
  const graph = [...bytes(1, node), ...str(2, 'matmul'),
    ...bytes(11, tensorInfo('A', n)), ...bytes(11, tensorInfo('B', n)), ...bytes(12, tensorInfo('C', n))];
  const opset = [...str(1, ''), ...num(2, 13)];
  return new Uint8Array([...num(1, 7), ...str(2, 'asyncnd-bench'), ...bytes(7, graph), ...bytes(8, opset)]);
}
