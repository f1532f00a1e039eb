package redisdiff

import (
	"embed"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Script is a named command sequence.
type Script struct {
	Name  string
	Steps []Step
	// Repro says how to run a drawn sequence again (the knobs); empty
	// for a script file.
	Repro string
}

// Step is one command of a Script.
type Step struct {
	// Line is the step's line in its script file (its index in a drawn
	// sequence).
	Line int
	Args []string
	// Compare is how the two replies must agree.
	Compare Compare
	// Each, for an EXEC, is how each of its replies must agree.
	Each []Compare
}

// Compare is how a step's replies must agree.
type Compare int

const (
	// Equal: the same reply.
	Equal Compare = iota
	// Shape: the same kinds of reply and array lengths, any values
	// (TIME).
	Shape
	// AnyPositive: equal replies, except that any two positive integers
	// agree: a TTL however long (the two servers run a step at different
	// times), while -2 (no key) and -1 (no TTL) must match.
	AnyPositive
	// Unordered: equal replies, except that an array's elements may come
	// in any order (a set's members, KEYS, whose order in Redis is its
	// hash table's).
	Unordered
	// IDs: equal replies, except that any two stream IDs of a clock's
	// milliseconds (13 digits or more, then a sequence) agree: those XADD *
	// gives out, which the two servers draw at different times.
	IDs
	// Times: as IDs, and any two integers of a clock's milliseconds agree
	// too: the delivery and seen times XINFO STREAM FULL answers of a
	// stream's consumer groups.
	Times
	// Stats: INFO's text agrees on its cmdstat_, errorstat_ and
	// total_error_replies lines, in any order (Redis lists commands in its
	// hash table's), their usec fields masked (timings).
	Stats
)

// prefixes are the script line prefixes of the comparisons other than
// Equal.
var prefixes = map[string]Compare{"shape:": Shape, "ttl:": AnyPositive, "set:": Unordered, "unordered:": Unordered, "stats:": Stats, "ids:": IDs}

func (s Step) String() string {
	parts := make([]string, len(s.Args))
	for i, a := range s.Args {
		parts[i] = a
		if a == "" || strings.ContainsAny(a, " \"\\") || strconv.Quote(a) != `"`+a+`"` {
			parts[i] = strconv.Quote(a)
		}
	}
	return strings.Join(parts, " ")
}

//go:embed scripts/*.txt
var scriptFiles embed.FS

// Scripts returns the scripts of scripts/, in file name order.
func Scripts() ([]Script, error) {
	entries, err := scriptFiles.ReadDir("scripts")
	if err != nil {
		return nil, err
	}
	var out []Script
	for _, e := range entries {
		b, err := scriptFiles.ReadFile(path.Join("scripts", e.Name()))
		if err != nil {
			return nil, err
		}
		s, err := Parse(e.Name(), string(b))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Parse reads a script (the format is in the package documentation).
func Parse(name, text string) (Script, error) {
	s := Script{Name: name}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		st := Step{Line: i + 1}
		for p, c := range prefixes {
			if rest, ok := strings.CutPrefix(line, p); ok {
				st.Compare, line = c, rest
			}
		}
		args, err := splitArgs(line)
		if err != nil {
			return Script{}, fmt.Errorf("%s:%d: %v", name, i+1, err)
		}
		st.Args = args
		s.Steps = append(s.Steps, st)
	}
	return s, nil
}

// splitArgs splits a line at spaces; an argument in double quotes is a Go
// string literal.
func splitArgs(line string) ([]string, error) {
	var args []string
	for line = strings.TrimLeft(line, " \t"); line != ""; line = strings.TrimLeft(line, " \t") {
		if line[0] != '"' {
			end := strings.IndexAny(line, " \t")
			if end < 0 {
				end = len(line)
			}
			args = append(args, line[:end])
			line = line[end:]
			continue
		}
		end := 1
		for end < len(line) && line[end] != '"' {
			if line[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(line) {
			return nil, fmt.Errorf("unterminated quoted argument in %q", line)
		}
		a, err := strconv.Unquote(line[:end+1])
		if err != nil {
			return nil, fmt.Errorf("argument %s: %v", line[:end+1], err)
		}
		args = append(args, a)
		line = line[end+1:]
		if line != "" && line[0] != ' ' && line[0] != '\t' {
			return nil, fmt.Errorf("no space after quoted argument in %q", line)
		}
	}
	return args, nil
}
