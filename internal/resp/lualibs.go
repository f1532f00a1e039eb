package resp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

// Two of the libraries Redis adds to its scripts' Lua: cjson (lua-cjson
// 2.1: encode, decode, null and the settings scripts use) and bit
// (LuaBitOp: 32-bit integer operations); luamsgpack.go has cmsgpack.
// struct is not provided.

// cjsonLib is a Lua state's cjson, with the settings of the script
// running in it.
type cjsonLib struct {
	null                   *lua.LUserData
	encodeDepth, decodeDep int
	invalidNumbers         bool
}

// reset gives the next script lua-cjson's default settings.
func (c *cjsonLib) reset() {
	c.encodeDepth, c.decodeDep, c.invalidNumbers = 1000, 1000, false
}

// openCJSON returns the state's cjson table and its settings.
func openCJSON(L *lua.LState) (*lua.LTable, *cjsonLib) {
	c := &cjsonLib{null: L.NewUserData()}
	c.reset()
	t := L.NewTable()
	t.RawSetString("null", c.null)
	t.RawSetString("encode", L.NewFunction(func(L *lua.LState) int {
		b, err := c.encode(nil, L.CheckAny(1), 1)
		if err != nil {
			L.RaiseError("%s", err)
		}
		L.Push(lua.LString(b))
		return 1
	}))
	t.RawSetString("decode", L.NewFunction(func(L *lua.LState) int {
		d := json.NewDecoder(bytes.NewReader([]byte(L.CheckString(1))))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			L.RaiseError("Expected value but found invalid token: %v", err)
		}
		if d.More() {
			L.RaiseError("Expected the end but found more after the value")
		}
		lv, err := c.toLua(L, v, 1)
		if err != nil {
			L.RaiseError("%s", err)
		}
		L.Push(lv)
		return 1
	}))
	setting := func(set func(L *lua.LState)) *lua.LFunction {
		return L.NewFunction(func(L *lua.LState) int {
			if L.GetTop() > 0 {
				set(L)
			}
			return 0
		})
	}
	t.RawSetString("encode_max_depth", setting(func(L *lua.LState) { c.encodeDepth = L.CheckInt(1) }))
	t.RawSetString("decode_max_depth", setting(func(L *lua.LState) { c.decodeDep = L.CheckInt(1) }))
	t.RawSetString("encode_invalid_numbers", setting(func(L *lua.LState) { c.invalidNumbers = L.ToBool(1) }))
	// Settings of lua-cjson's buffers and number formats, which change no
	// result TideKV gives.
	for _, name := range []string{"encode_keep_buffer", "encode_number_precision", "encode_sparse_array", "decode_invalid_numbers"} {
		t.RawSetString(name, setting(func(*lua.LState) {}))
	}
	return t, c
}

// encode appends v as JSON, as lua-cjson writes it: numbers with 14
// digits, "/" escaped, a table with only positive integer keys an array
// (holes null), any other an object, an empty one {}.
func (c *cjsonLib) encode(b []byte, v lua.LValue, depth int) ([]byte, error) {
	switch v := v.(type) {
	case lua.LString:
		return appendJSONString(b, string(v)), nil
	case lua.LBool:
		return strconv.AppendBool(b, bool(v)), nil
	case lua.LNumber:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			if !c.invalidNumbers {
				return b, fmt.Errorf("Cannot serialise number: must not be NaN or Inf")
			}
			return append(b, formatArgNumber(f)...), nil
		}
		return append(b, fmt.Sprintf("%.14g", f)...), nil
	case *lua.LUserData:
		if v == c.null {
			return append(b, "null"...), nil
		}
	case *lua.LTable:
		if depth > c.encodeDepth {
			return b, fmt.Errorf("Cannot serialise, excessive nesting (%d)", depth)
		}
		return c.encodeTable(b, v, depth)
	case *lua.LNilType:
		return append(b, "null"...), nil
	}
	return b, fmt.Errorf("Cannot serialise %s: type not supported", v.Type())
}

func (c *cjsonLib) encodeTable(b []byte, t *lua.LTable, depth int) ([]byte, error) {
	n, top, array := 0, 0, true
	t.ForEach(func(k, _ lua.LValue) {
		if f, ok := k.(lua.LNumber); ok && f >= 1 && float64(f) == math.Floor(float64(f)) {
			n, top = n+1, max(top, int(f))
		} else {
			array = false
		}
	})
	var err error
	if array && n > 0 {
		if top > 2*n && top > 10 {
			return b, fmt.Errorf("Cannot serialise table: excessively sparse array")
		}
		b = append(b, '[')
		for i := 1; i <= top; i++ {
			if i > 1 {
				b = append(b, ',')
			}
			if b, err = c.encode(b, t.RawGetInt(i), depth+1); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	}
	b = append(b, '{')
	first := true
	t.ForEach(func(k, v lua.LValue) {
		if err != nil {
			return
		}
		var key string
		switch k := k.(type) {
		case lua.LString:
			key = string(k)
		case lua.LNumber:
			key = fmt.Sprintf("%.14g", float64(k))
		default:
			err = fmt.Errorf("Cannot serialise table: table key must be a number or string")
			return
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(appendJSONString(b, key), ':')
		b, err = c.encode(b, v, depth+1)
	})
	return append(b, '}'), err
}

// appendJSONString appends s quoted as lua-cjson does: '"', '\\' and '/'
// escaped, control characters as \b \f \n \r \t or \u00XX, other bytes
// as they are.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case '"', '\\', '/':
			b = append(b, '\\', ch)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			if ch < 0x20 || ch == 0x7f {
				b = fmt.Appendf(b, `\u%04x`, ch)
			} else {
				b = append(b, ch)
			}
		}
	}
	return append(b, '"')
}

// toLua is decoded JSON as lua-cjson gives it: null cjson.null, arrays
// tables from 1.
func (c *cjsonLib) toLua(L *lua.LState, v any, depth int) (lua.LValue, error) {
	switch v := v.(type) {
	case nil:
		return c.null, nil
	case bool:
		return lua.LBool(v), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return lua.LNumber(f), err
	case string:
		return lua.LString(v), nil
	}
	if depth > c.decodeDep {
		return nil, fmt.Errorf("Found too many nested data structures (%d)", depth)
	}
	t := L.NewTable()
	switch v := v.(type) {
	case []any:
		for i, e := range v {
			lv, err := c.toLua(L, e, depth+1)
			if err != nil {
				return nil, err
			}
			t.RawSetInt(i+1, lv)
		}
	case map[string]any:
		for k, e := range v {
			lv, err := c.toLua(L, e, depth+1)
			if err != nil {
				return nil, err
			}
			t.RawSetString(k, lv)
		}
	}
	return t, nil
}

// openBit returns LuaBitOp's bit table: operations on numbers taken as
// 32-bit integers (rounded, modulo 2^32), returning signed ones.
func openBit(L *lua.LState) *lua.LTable {
	arg := func(L *lua.LState, i int) uint32 {
		f := math.Mod(math.RoundToEven(float64(L.CheckNumber(i))), 1<<32)
		return uint32(int64(f))
	}
	ret := func(L *lua.LState, u uint32) int {
		L.Push(lua.LNumber(int32(u)))
		return 1
	}
	fold := func(op func(a, b uint32) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			r := arg(L, 1)
			for i := 2; i <= L.GetTop(); i++ {
				r = op(r, arg(L, i))
			}
			return ret(L, r)
		}
	}
	shift := func(op func(a uint32, n uint) uint32) lua.LGFunction {
		return func(L *lua.LState) int { return ret(L, op(arg(L, 1), uint(arg(L, 2)&31))) }
	}
	fns := map[string]lua.LGFunction{
		"tobit":   func(L *lua.LState) int { return ret(L, arg(L, 1)) },
		"bnot":    func(L *lua.LState) int { return ret(L, ^arg(L, 1)) },
		"band":    fold(func(a, b uint32) uint32 { return a & b }),
		"bor":     fold(func(a, b uint32) uint32 { return a | b }),
		"bxor":    fold(func(a, b uint32) uint32 { return a ^ b }),
		"lshift":  shift(func(a uint32, n uint) uint32 { return a << n }),
		"rshift":  shift(func(a uint32, n uint) uint32 { return a >> n }),
		"arshift": shift(func(a uint32, n uint) uint32 { return uint32(int32(a) >> n) }),
		"rol":     shift(func(a uint32, n uint) uint32 { return a<<n | a>>((32-n)&31) }),
		"ror":     shift(func(a uint32, n uint) uint32 { return a>>n | a<<((32-n)&31) }),
		"bswap": func(L *lua.LState) int {
			a := arg(L, 1)
			return ret(L, a>>24|(a>>8)&0xff00|(a&0xff00)<<8|a<<24)
		},
		"tohex": func(L *lua.LState) int {
			a, n := arg(L, 1), 8
			if L.GetTop() > 1 {
				n = int(int32(arg(L, 2)))
			}
			format := "%0*x"
			if n < 0 {
				n, format = -n, "%0*X"
			}
			n = min(n, 8)
			L.Push(lua.LString(fmt.Sprintf(format, n, uint64(a)&(1<<(4*n)-1))))
			return 1
		},
	}
	t := L.NewTable()
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	return t
}
