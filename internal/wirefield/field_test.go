package wirefield

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestNext(t *testing.T) {
	var buf []byte
	buf = protowire.AppendTag(buf, 1, protowire.VarintType)
	buf = protowire.AppendVarint(buf, 300)
	buf = protowire.AppendTag(buf, 2, protowire.BytesType)
	buf = protowire.AppendBytes(buf, []byte("abc"))
	buf = protowire.AppendTag(buf, 3, protowire.Fixed64Type)
	buf = protowire.AppendFixed64(buf, 7)

	num, v, b, rest, isBytes, ok := Next(buf)
	if !ok || num != 1 || v != 300 || b != nil || isBytes {
		t.Fatalf("varint field: %d %d %q %v %v", num, v, b, isBytes, ok)
	}
	num, v, b, rest, isBytes, ok = Next(rest)
	if !ok || num != 2 || v != 0 || string(b) != "abc" || !isBytes || cap(b) != 3 {
		t.Fatalf("bytes field: %d %d %q (cap %d) %v %v", num, v, b, cap(b), isBytes, ok)
	}
	if _, _, _, _, _, ok = Next(rest); ok {
		t.Fatal("a fixed64 field is read; want it refused (left to proto.Unmarshal)")
	}
	for _, bad := range [][]byte{{0x08}, {0x12, 0x05, 'a'}, {0x80}} {
		if _, _, _, _, _, ok := Next(bad); ok {
			t.Errorf("Next(%x) parsed truncated bytes", bad)
		}
	}
}
