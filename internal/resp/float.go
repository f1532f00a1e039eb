package resp

import (
	"math/big"
	"strings"
)

// INCRBYFLOAT's numbers are Redis's on x86-64, where its long double is
// the x87 80-bit format: a 64-bit mantissa and a 15-bit exponent. They
// are big.Floats of that precision, rounded to nearest even as x87
// rounds, so that sums (0.1 + 0.2 is 0.3 there, not float64's
// 0.30000000000000004) and their text are Redis's.
const (
	longDoublePrec = 64
	// longDoubleMaxExp: |x| < 2^16384 is finite (big.Float's exponent
	// is one more than IEEE's).
	longDoubleMaxExp = 16384
	// maxLongDoubleChars is Redis's bound on a number's text.
	maxLongDoubleChars = 5 * 1024
)

// parseLongDouble reads b as Redis's string2ld does (C's strtold, all of
// b, no leading space, no NaN, no overflow): decimal, hexadecimal (0x,
// with an optional p exponent), inf and infinity in any case.
func parseLongDouble(b []byte) (*big.Float, bool) {
	s := string(b)
	if s == "" || len(s) >= maxLongDoubleChars || strings.ContainsRune(" \t\n\v\f\r", rune(s[0])) {
		return nil, false
	}
	unsigned := strings.TrimLeft(s, "+-")
	if len(s)-len(unsigned) > 1 {
		return nil, false
	}
	if l := strings.ToLower(unsigned); l == "inf" || l == "infinity" {
		return new(big.Float).SetInf(s[0] == '-'), true
	}
	base := 10
	if strings.HasPrefix(unsigned, "0x") || strings.HasPrefix(unsigned, "0X") {
		if strings.Contains(s, "_") {
			return nil, false
		}
		base = 0
	}
	f, _, err := big.ParseFloat(s, base, longDoublePrec, big.ToNearestEven)
	if err != nil || f.MantExp(nil) > longDoubleMaxExp {
		return nil, false
	}
	return f, true
}

// addLongDouble is a + b in long double arithmetic; false: the sum is not
// finite (Redis's "increment would produce NaN or Infinity").
func addLongDouble(a, b *big.Float) (*big.Float, bool) {
	if a.IsInf() || b.IsInf() {
		return nil, false
	}
	sum := new(big.Float).SetPrec(longDoublePrec).SetMode(big.ToNearestEven).Add(a, b)
	return sum, sum.MantExp(nil) <= longDoubleMaxExp
}

// formatLongDouble writes f as Redis's human form does: printf's %.17Lf
// with the trailing zeros (and a trailing point) dropped, and -0 as 0.
func formatLongDouble(f *big.Float) string {
	s := f.Text('f', 17)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}
