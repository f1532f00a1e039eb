package resp

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// setOptions are SET's options after key and value, or GETEX's after
// key.
type setOptions struct {
	nx, xx, get bool
	// timeOpt is the expiry option given (EX, PX, EXAT, PXAT, KEEPTTL,
	// PERSIST; "": none), when its time.
	timeOpt string
	when    []byte
}

// parseSetOptions reads SET's options (getex false: NX, XX, GET, EX
// seconds, PX milliseconds, EXAT and PXAT, Unix times in seconds and
// milliseconds, and KEEPTTL) or GETEX's (EX, PX, EXAT, PXAT, PERSIST) as
// Redis does: an option may be repeated (the last time wins), and NX with
// XX or two different expiry options are a syntax error. The time is
// checked by expiry. It returns the error reply, if any.
func parseSetOptions(args [][]byte, getex bool) (setOptions, string) {
	var o setOptions
	for i := 0; i < len(args); i++ {
		opt := strings.ToUpper(string(args[i]))
		ok := false
		switch opt {
		case "NX", "XX":
			ok = !getex && !(opt == "NX" && o.xx) && !(opt == "XX" && o.nx)
			o.nx, o.xx = o.nx || opt == "NX", o.xx || opt == "XX"
		case "GET":
			ok, o.get = !getex, true
		case "KEEPTTL", "PERSIST":
			ok = getex == (opt == "PERSIST") && (o.timeOpt == "" || o.timeOpt == opt)
			o.timeOpt = opt
		case "EX", "PX", "EXAT", "PXAT":
			ok = (o.timeOpt == "" || o.timeOpt == opt) && i+1 < len(args)
			if ok {
				o.timeOpt, o.when = opt, args[i+1]
				i++
			}
		}
		if !ok {
			return o, errSyntax
		}
	}
	return o, ""
}

// expiry is what the options do with the key's TTL (KEEPTTL: keep it;
// none or PERSIST: clear it), or cmd's error reply for a time that is not
// an integer (errNotInt) or not positive (or too large for TideKV's times,
// about 292 years): "ERR invalid expire time in '<cmd>' command".
func (o setOptions) expiry(cmd string) (Expiry, string) {
	switch o.timeOpt {
	case "KEEPTTL":
		return Expiry{Keep: true}, ""
	case "EX", "PX", "EXAT", "PXAT":
		d, rerr := parseExpireTime(o.when, o.timeOpt == "EX" || o.timeOpt == "EXAT", cmd)
		return expiryOf(d, o.timeOpt == "EXAT" || o.timeOpt == "PXAT"), rerr
	}
	return Expiry{}, ""
}

// parseExpireTime reads a positive time to live or Unix time, in seconds
// or milliseconds, for cmd's error reply.
func parseExpireTime(arg []byte, seconds bool, cmd string) (time.Duration, string) {
	bad := "ERR invalid expire time in '" + cmd + "' command"
	d, rerr := parseTTL(arg, seconds, bad)
	if rerr == "" && d <= 0 {
		rerr = bad
	}
	return d, rerr
}

// expiryOf is an expiry d from now or, with at, d after the Unix epoch.
func expiryOf(d time.Duration, at bool) Expiry {
	if at {
		return Expiry{At: time.Unix(0, 0).Add(d)}
	}
	return Expiry{TTL: d}
}

// parseTTL reads a time to live, or a Unix time, in seconds or
// milliseconds; it may be zero or negative. Not an integer is errNotInt,
// too large for a time.Duration is tooLarge.
func parseTTL(arg []byte, seconds bool, tooLarge string) (time.Duration, string) {
	n, err := strconv.ParseInt(string(arg), 10, 64)
	if err != nil {
		return 0, errNotInt
	}
	unit := time.Millisecond
	if seconds {
		unit = time.Second
	}
	if n > math.MaxInt64/int64(unit) || n < math.MinInt64/int64(unit) {
		return 0, tooLarge
	}
	return time.Duration(n) * unit, ""
}

func cmdSet(x *call) {
	key, val := x.args[1], x.args[2]
	o, rerr := parseSetOptions(x.args[3:], false)
	if rerr != "" {
		x.c.WriteError(rerr)
		return
	}
	e, rerr := o.expiry("set")
	if rerr != "" {
		x.c.WriteError(rerr)
		return
	}
	if isMarker(val) {
		x.c.WriteError(errReserved)
		return
	}
	if !o.nx && !o.xx && !o.get {
		x.setPlain(key, val, e)
		return
	}
	old, oldExists, applied, err := x.casLoop(encKey(key), e, func(cur []byte, exists bool) ([]byte, casWrite, string) {
		if o.get && exists && isMarker(cur) {
			return nil, casNone, errWrongType
		}
		if (o.nx && exists) || (o.xx && !exists) {
			return nil, casNone, ""
		}
		return val, casPut, ""
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	switch {
	case o.get && oldExists:
		x.c.WriteBulk(old)
	case o.get:
		x.c.WriteNull()
	case applied:
		x.c.WriteString("OK")
	default:
		x.c.WriteNull()
	}
}

// setPlain writes val at key with expiry e (none: a TTL the key had is
// cleared) and replies OK.
func (x *call) setPlain(key, val []byte, e Expiry) {
	var err error
	if e == (Expiry{}) {
		err = x.kv.Put(x.ctx, encKey(key), val)
	} else {
		err = x.kv.Write(x.ctx, []Op{{Key: encKey(key), Value: val, Expiry: e}})
	}
	if err != nil {
		replyErr(x.c, err)
		return
	}
	x.c.WriteString("OK")
}

// cmdSetEx: SETEX key seconds value, PSETEX key milliseconds value: SET
// key value EX seconds (PX milliseconds), the time checked first.
func cmdSetEx(x *call) {
	d, rerr := parseExpireTime(x.args[2], x.name == "setex", x.name)
	switch {
	case rerr != "":
		x.c.WriteError(rerr)
	case isMarker(x.args[3]):
		x.c.WriteError(errReserved)
	default:
		x.setPlain(x.args[1], x.args[3], Expiry{TTL: d})
	}
}

func cmdSetNX(x *call) {
	if isMarker(x.args[2]) {
		x.c.WriteError(errReserved)
		return
	}
	nv := x.args[2]
	swapped, _, _, err := x.kv.CompareAndSet(x.ctx, encKey(x.args[1]), nil, &nv, Expiry{})
	if err != nil {
		replyErr(x.c, err)
		return
	}
	if swapped {
		x.c.WriteInt(1)
	} else {
		x.c.WriteInt(0)
	}
}

func cmdGetSet(x *call) {
	x.args = [][]byte{[]byte("set"), x.args[1], x.args[2], []byte("GET")}
	cmdSet(x)
}

// replyError is an error that is already a Redis error reply.
type replyError string

func (e replyError) Error() string { return string(e) }

func writeCASErr(c replyConn, err error) {
	var re replyError
	if errors.As(err, &re) {
		c.WriteError(string(re))
		return
	}
	replyErr(c, err)
}

// casWrite is what a casLoop step writes.
type casWrite int

const (
	casNone   casWrite = iota // nothing: decide declined
	casPut                    // the new value
	casDelete                 // a delete of the key
)

// casLoop reads key and applies decide to its state until a compare-and-set
// succeeds or decide declines. decide returns the new value, what to
// write, and a Redis error to reply instead (no write); a new value is
// written with expiry e. It returns the state before the successful write
// (or the state decide declined on). Each round is one atomic
// compare-and-set of the store, so the command is atomic on its key.
func (x *call) casLoop(key []byte, e Expiry, decide func(cur []byte, exists bool) ([]byte, casWrite, string)) (old []byte, oldExists, applied bool, err error) {
	cur, err := x.kv.Get(x.ctx, key)
	exists := err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, false, false, err
	}
	for range x.s.cfg.CASAttempts {
		nv, w, rerr := decide(cur, exists)
		if rerr != "" {
			return cur, exists, false, replyError(rerr)
		}
		if w == casNone {
			return cur, exists, false, nil
		}
		var expected, newValue *[]byte
		if exists {
			c := cur
			expected = &c
		}
		if w == casPut {
			newValue = &nv
		}
		swapped, now, nowExists, err := x.kv.CompareAndSet(x.ctx, key, expected, newValue, e)
		if err != nil {
			return nil, false, false, err
		}
		if swapped {
			return cur, exists, true, nil
		}
		cur, exists = now, nowExists
	}
	return nil, false, false, fmt.Errorf("%w: key %q", errContention, key)
}
