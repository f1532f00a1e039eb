package resp

import (
	"encoding/binary"
	"math"

	lua "github.com/yuin/gopher-lua"
)

// cmsgpack, as Redis's scripts have it (lua-cmsgpack 0.4): pack encodes
// its arguments one after the other, unpack decodes every value in a
// string, unpack_one and unpack_limit some of them from an offset, with
// the offset to go on from (-1 at the end). Encodings as lua-cmsgpack
// chooses them: a number with an integer value as the smallest integer,
// any other as float32 when that is exact, else float64; strings as str
// (fixstr, str8/16/32); a table with keys 1..n an array, any other a map
// in the table's order; tables deeper than msgpackMaxNesting, and
// functions, nil. Decoding takes what lua-cmsgpack takes (no bin or ext
// types).

const msgpackMaxNesting = 16

func openCMsgpack(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("pack", L.NewFunction(func(L *lua.LState) int {
		if L.GetTop() == 0 {
			L.ArgError(0, "MessagePack pack needs input.")
		}
		var b []byte
		for i := 1; i <= L.GetTop(); i++ {
			b = msgpackEncode(b, L.Get(i), 0)
		}
		L.Push(lua.LString(b))
		return 1
	}))
	t.RawSetString("unpack", L.NewFunction(func(L *lua.LState) int { return msgpackUnpack(L, 0, 0) }))
	t.RawSetString("unpack_one", L.NewFunction(func(L *lua.LState) int { return msgpackUnpack(L, 1, L.OptInt(2, 0)) }))
	t.RawSetString("unpack_limit", L.NewFunction(func(L *lua.LState) int { return msgpackUnpack(L, L.CheckInt(2), L.OptInt(3, 0)) }))
	return t
}

func msgpackEncode(b []byte, v lua.LValue, level int) []byte {
	switch v := v.(type) {
	case lua.LBool:
		if v {
			return append(b, 0xc3)
		}
		return append(b, 0xc2)
	case lua.LNumber:
		f := float64(v)
		if f == math.Trunc(f) && f >= -0x1p63 && f < 0x1p63 {
			return msgpackInt(b, int64(f))
		}
		if float64(float32(f)) == f {
			return binary.BigEndian.AppendUint32(append(b, 0xca), math.Float32bits(float32(f)))
		}
		return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(f))
	case lua.LString:
		b = msgpackHeader(b, len(v), 0xa0, 31, 0xd9, 0xda, 0xdb)
		return append(b, v...)
	case *lua.LTable:
		if level == msgpackMaxNesting {
			return append(b, 0xc0)
		}
		if n, ok := luaArrayLen(v); ok {
			b = msgpackHeader(b, n, 0x90, 15, 0, 0xdc, 0xdd)
			for i := 1; i <= n; i++ {
				b = msgpackEncode(b, v.RawGetInt(i), level+1)
			}
			return b
		}
		n := 0
		v.ForEach(func(lua.LValue, lua.LValue) { n++ })
		b = msgpackHeader(b, n, 0x80, 15, 0, 0xde, 0xdf)
		v.ForEach(func(k, e lua.LValue) {
			b = msgpackEncode(msgpackEncode(b, k, level+1), e, level+1)
		})
		return b
	}
	return append(b, 0xc0)
}

// luaArrayLen is n if t's keys are exactly 1..n (an empty table too).
func luaArrayLen(t *lua.LTable) (int, bool) {
	n, top, array := 0, 0.0, true
	t.ForEach(func(k, _ lua.LValue) {
		f, ok := k.(lua.LNumber)
		if !ok || f < 1 || float64(f) != math.Floor(float64(f)) {
			array = false
			return
		}
		n, top = n+1, max(top, float64(f))
	})
	return n, array && float64(n) == top
}

// msgpackHeader appends a length: in the fix byte up to fixMax, else
// after the 8-bit (if any), 16-bit or 32-bit form's byte.
func msgpackHeader(b []byte, n int, fix byte, fixMax int, b8, b16, b32 byte) []byte {
	switch {
	case n <= fixMax:
		return append(b, fix|byte(n))
	case n <= 0xff && b8 != 0:
		return append(b, b8, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, b16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, b32), uint32(n))
}

func msgpackInt(b []byte, n int64) []byte {
	switch {
	case n >= 0 && n <= 127:
		return append(b, byte(n))
	case n >= 0 && n <= 0xff:
		return append(b, 0xcc, byte(n))
	case n >= 0 && n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n >= 0 && n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	case n >= 0:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

// msgpackUnpack decodes up to limit values (0: all of them, and then no
// offset is returned) from offset, as lua-cmsgpack's mp_unpack_full.
func msgpackUnpack(L *lua.LState, limit, offset int) int {
	s := L.CheckString(1)
	switch {
	case offset < 0 || limit < 0:
		L.RaiseError("Invalid request to unpack with offset of %d and limit of %d.", offset, len(s))
	case offset > len(s):
		L.RaiseError("Start offset %d greater than input length %d.", offset, len(s))
	}
	all := limit == 0 && offset == 0
	d := msgpackDecoder{L: L, b: []byte(s[offset:])}
	n := 0
	for len(d.b) > 0 && (all || n < limit) {
		L.Push(d.value())
		n++
	}
	if all {
		return n
	}
	next := lua.LNumber(len(s) - len(d.b))
	if len(d.b) == 0 {
		next = -1
	}
	L.Insert(next, L.GetTop()-n+1)
	return n + 1
}

type msgpackDecoder struct {
	L     *lua.LState
	b     []byte
	depth int // arrays and maps open around the value being read
}

// maxMsgpackDepth bounds how deeply unpacked arrays and maps nest: each
// level is a Go call and a Lua table, and a 1 MiB argument of one-element
// arrays would otherwise nest a million deep in one call.
const maxMsgpackDepth = 1000

// nest opens an array or map, refusing one past maxMsgpackDepth.
func (d *msgpackDecoder) nest() {
	if d.depth++; d.depth > maxMsgpackDepth {
		d.L.RaiseError("Too many nested arrays or maps in input (the maximum is %d).", maxMsgpackDepth)
	}
}

// take is the next n bytes.
func (d *msgpackDecoder) take(n int) []byte {
	if n > len(d.b) {
		d.L.RaiseError("Missing bytes in input.")
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *msgpackDecoder) uint(size int) uint64 {
	p := d.take(size)
	var v uint64
	for _, c := range p {
		v = v<<8 | uint64(c)
	}
	return v
}

func (d *msgpackDecoder) value() lua.LValue {
	c := d.take(1)[0]
	switch {
	case c <= 0x7f:
		return lua.LNumber(c)
	case c >= 0xe0:
		return lua.LNumber(int8(c))
	case c >= 0xa0 && c <= 0xbf:
		return lua.LString(d.take(int(c & 0x1f)))
	case c >= 0x90 && c <= 0x9f:
		return d.array(int(c & 0x0f))
	case c >= 0x80 && c <= 0x8f:
		return d.mapOf(int(c & 0x0f))
	}
	switch c {
	case 0xc0:
		return lua.LNil
	case 0xc2:
		return lua.LFalse
	case 0xc3:
		return lua.LTrue
	case 0xca:
		return lua.LNumber(math.Float32frombits(uint32(d.uint(4))))
	case 0xcb:
		return lua.LNumber(math.Float64frombits(d.uint(8)))
	case 0xcc, 0xcd, 0xce, 0xcf:
		return lua.LNumber(d.uint(1 << (c - 0xcc)))
	case 0xd0:
		return lua.LNumber(int8(d.uint(1)))
	case 0xd1:
		return lua.LNumber(int16(d.uint(2)))
	case 0xd2:
		return lua.LNumber(int32(d.uint(4)))
	case 0xd3:
		return lua.LNumber(int64(d.uint(8)))
	case 0xd9:
		return lua.LString(d.take(int(d.uint(1))))
	case 0xda:
		return lua.LString(d.take(int(d.uint(2))))
	case 0xdb:
		return lua.LString(d.take(int(d.uint(4))))
	case 0xdc:
		return d.array(int(d.uint(2)))
	case 0xdd:
		return d.array(int(d.uint(4)))
	case 0xde:
		return d.mapOf(int(d.uint(2)))
	case 0xdf:
		return d.mapOf(int(d.uint(4)))
	}
	d.L.RaiseError("Bad data format in input.")
	return lua.LNil
}

func (d *msgpackDecoder) array(n int) lua.LValue {
	d.nest()
	t := d.L.CreateTable(min(n, len(d.b)), 0)
	for i := 1; i <= n; i++ {
		t.RawSetInt(i, d.value())
	}
	d.depth--
	return t
}

func (d *msgpackDecoder) mapOf(n int) lua.LValue {
	d.nest()
	t := d.L.NewTable()
	for range n {
		k := d.value()
		v := d.value()
		if k != lua.LNil {
			t.RawSet(k, v)
		}
	}
	d.depth--
	return t
}
