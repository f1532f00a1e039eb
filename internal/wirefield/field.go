package wirefield

import "google.golang.org/protobuf/encoding/protowire"

// Next splits buf's first field: its number, a varint's value v or a
// length-delimited value b, and the rest of buf. b aliases buf with its
// capacity capped at its end, so that an append to it copies rather than
// writing over the next field. ok false: a wire type other than varint
// or length-delimited (which the hand decoders leave to proto.Unmarshal),
// or bytes that do not parse.
func Next(buf []byte) (num protowire.Number, v uint64, b, rest []byte, isBytes, ok bool) {
	num, typ, n := protowire.ConsumeTag(buf)
	if n < 0 {
		return 0, 0, nil, nil, false, false
	}
	buf = buf[n:]
	switch typ {
	case protowire.VarintType:
		v, n = protowire.ConsumeVarint(buf)
	case protowire.BytesType:
		b, n = protowire.ConsumeBytes(buf)
		b, isBytes = b[:len(b):len(b)], true
	default:
		return 0, 0, nil, nil, false, false
	}
	if n < 0 {
		return 0, 0, nil, nil, false, false
	}
	return num, v, b, buf[n:], isBytes, true
}
